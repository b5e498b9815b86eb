"""Stage 4, which note sentences each answer sentence cites: every implementation and its learned parts.

- `lm.py`: `LMAligner`, one LM call (`program/archehr/alignment=lm`).
- `similarity.py`: `SimilarityAligner`, dense + BM25 similarity, no LM (`alignment=similarity`).
- `learned.py`: `LearnedAligner`, a fitted logistic head (`alignment=learned`); `features.py`: what it scores;
  `fit.py`: how it is fitted.
"""
