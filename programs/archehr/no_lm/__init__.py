"""Non-LLM implementations of the ArchEHR stages 2-4: same inputs and outputs as the LM stages (stage 1 without an
API LM: programs/archehr/question_model.py, the learned one; question_baseline.py, the trivial one)."""

from programs.archehr.no_lm.align import SimilarityAligner
from programs.archehr.no_lm.answer import ExtractiveAnswer
from programs.archehr.no_lm.evidence import EmbeddingEvidenceScorer, EmbeddingLikertEvidenceScorer

__all__ = ["EmbeddingEvidenceScorer", "EmbeddingLikertEvidenceScorer", "ExtractiveAnswer", "SimilarityAligner"]
