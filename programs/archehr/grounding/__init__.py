"""The grounding check after stage 4: is each answer sentence supported by the note? Every implementation and its
learned parts.

- `similarity.py`: `SimilarityGroundingCheck`, similarity to the note's sentences (`program/archehr/grounding=similarity`),
  and what the other checks build on (`NoteFacts`, `verdict_of`).
- `claims.py`: `ClaimsGroundingCheck`, what each sentence claims must be in the note (`grounding=claims`).
- `learned.py`: `LearnedGroundingCheck`, the claims rules and a learned verifier (`grounding=learned`); `verifier/`:
  the verifier, its features, training pairs and weights.
- `judge.py`: `GroundingJudge`, the optional LM judge of flagged sentences (`program.grounding.judge=lm`).
- `verdicts.py`: the verdict names every check and the report use.
"""
