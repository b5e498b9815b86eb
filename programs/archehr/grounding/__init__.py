"""The grounding check after stage 4: is each answer sentence supported by the note? Every implementation and its
learned parts.

- `similarity.py`: `SimilarityGroundingCheck`, similarity to the note's sentences (`program/archehr/grounding=similarity`),
  and what the other checks build on (`NoteFacts`, `verdict_of`).
- `claims.py`: `ClaimsGroundingCheck`, what each sentence claims must be in the note (`grounding=claims`).
- `reader.py`: `ReaderGroundingCheck`, the claims rules and a reader verifier (`grounding=reader`);
  `reader_verifier.py`: the verifier, a small LM's reading of each sentence and a learned head.
- `judge.py`: `GroundingJudge`, the optional LM judge (`program.grounding.judge=lm`); `perturb.py` makes its examples.
- `verdicts.py`: the verdict names every check and the report use.
"""
