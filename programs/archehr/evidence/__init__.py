"""Stage 2, which note sentences are evidence: every implementation and its learned parts.

- `lm.py`: `LMEvidenceScorer`, Likert 1-5 per note sentence from the LM (`program/archehr/evidence=lm`).
- `embedding.py`: `EmbeddingEvidenceScorer` / `EmbeddingLikertEvidenceScorer`, dense + BM25 similarity, no LM
  (`evidence=embedding|embedding_likert`).
- `learned.py`: `LearnedEvidenceScorer`, a fitted logistic head (`evidence=learned`); `features.py`: what it scores;
  `fit.py`: how it is fitted.
"""
