"""Non-LLM implementations of the four ArchEHR stages: same inputs and outputs as the LM stages."""

from programs.archehr.offline.align import SimilarityAligner
from programs.archehr.offline.answer import ExtractiveAnswer
from programs.archehr.offline.evidence import EmbeddingEvidenceScorer, EmbeddingLikertEvidenceScorer
from programs.archehr.offline.question import RuleQuestionInterpreter

__all__ = ["EmbeddingEvidenceScorer", "EmbeddingLikertEvidenceScorer", "ExtractiveAnswer", "RuleQuestionInterpreter",
           "SimilarityAligner"]
