"""The grounding check after stage 4: is each answer sentence supported by the note? Every implementation and its
learned parts.

- `similarity.py`: `GroundingCheck`, similarity to the note's sentences (`program/archehr/grounding=similarity`),
  and what the other checks build on (`NoteFacts`, `verdict_of`).
- `claims.py`: `ClaimsGroundingCheck`, what each sentence claims must be in the note (`grounding=claims`).
- `learned.py`: `LearnedGroundingCheck`, the claims rules and a learned verifier (`grounding=learned`); `verifier/`:
  the verifier, its features, training pairs and weights.
- `judge.py`: `GroundingJudge`, the optional LM judge of flagged sentences (`program.grounding.judge=lm`).
- `verdicts.py`: the verdict names every check and the report use.

This package is also the old module `programs.archehr.grounding` (the similarity check, now
`grounding/similarity.py`): its public names are re-exported here so
`_target_: programs.archehr.grounding.GroundingCheck` keeps resolving to the same object. The old name collides with
the package's, so it needs no entry in `common.aliases.MOVED_MODULES` (and gets no deprecation line); the re-export
goes with the other old names in the next release.
"""

from programs.archehr.grounding.similarity import GroundingCheck, NoteFacts, content, verdict_of

__all__ = ["GroundingCheck", "NoteFacts", "content", "verdict_of"]
