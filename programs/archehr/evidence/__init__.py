"""Stage 2, which note sentences are evidence: every implementation and its learned parts.

- `lm.py`: `EvidenceScorer`, Likert 1-5 per note sentence from one LM call (`program/archehr/evidence=lm`).
- `embedding.py`: `EmbeddingEvidenceScorer` / `EmbeddingLikertEvidenceScorer`, dense + BM25 similarity, no LM
  (`evidence=embedding|embedding_likert`).
- `learned.py`: `LearnedEvidenceScorer`, a fitted logistic head (`evidence=learned`); `features.py`: what it scores;
  `fit.py`: how it is fitted.

This package is also the old module `programs.archehr.evidence` (the LM stage, now `evidence/lm.py`): its public
names are re-exported here so `_target_: programs.archehr.evidence.EvidenceScorer` and
`from programs.archehr.evidence import EvidenceScorer` keep resolving to the same objects. The old name collides
with the package's, so it needs no entry in `common.aliases.MOVED_MODULES` (and gets no deprecation line); the
re-export goes with the other old names in the next release.
"""

from programs.archehr.evidence.lm import FORMS, LIKERT, EvidenceScorer, all_equal, select_by_likert

__all__ = ["FORMS", "LIKERT", "EvidenceScorer", "all_equal", "select_by_likert"]
