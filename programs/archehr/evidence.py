"""Stage 2: score every note sentence 1-5 and select evidence (strict >= 4, lenient >= 3, else first 3)."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, StageOutputError, describe
from programs.archehr.stages import check_anchor
from programs.archehr.text import numbered
from signatures.archehr import ScoreEvidence
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import NoteSentence

LIKERT = [1, 2, 3, 4, 5]


def select_by_likert(sentences: list[NoteSentence], scores: list[int], strict_threshold: int, lenient_threshold: int,
                    fallback_count: int) -> tuple[list[str], str]:
    """The seed's selection: every sentence scored >= strict; else >= lenient; else the first `fallback_count`."""
    strict = [s.id for s, v in zip(sentences, scores, strict=True) if v >= strict_threshold]
    if strict:
        return strict, "strict"
    lenient = [s.id for s, v in zip(sentences, scores, strict=True) if v >= lenient_threshold]
    if lenient:
        return lenient, "lenient"
    return [s.id for s in sentences[:fallback_count]], "first_n"


class EvidenceScorer(dspy.Module):
    """ScoreEvidence gives every note sentence a Likert score; the seed's strict/lenient/first-n rule selects."""

    uses_lm = True

    def __init__(self, strict_threshold: int, lenient_threshold: int, fallback_count: int,
                 tokens_per_sentence: int | None = 4, anchor: str = "clinician_question") -> None:
        super().__init__()
        # clinician_question: the seed's choice (62.9 vs 60.2 F1 with the raw narrative)
        self.anchor = check_anchor(anchor)
        self.tokens_per_sentence = tokens_per_sentence  # reply bound: 32 + this per sentence (null: the LM's)
        self.strict_threshold = strict_threshold
        self.lenient_threshold = lenient_threshold
        self.fallback_count = fallback_count
        self.score = dspy.Predict(ScoreEvidence)

    def select(self, sentences: list[NoteSentence], scores: list[int]) -> tuple[list[str], str]:
        return select_by_likert(sentences, scores, self.strict_threshold, self.lenient_threshold, self.fallback_count)

    def forward(self, clinician_question: str, sentences: list[NoteSentence]) -> dspy.Prediction:
        n = len(sentences)
        # One score per sentence, each 1-5: a grammar-capable backend cannot emit anything else.
        signature = with_output_schema(
            self.score.signature, "scores",
            {"type": "array", "items": {"type": "integer", "enum": LIKERT}, "minItems": n, "maxItems": n},
        )
        try:
            out = self.score(
                clinician_question=clinician_question,
                note_sentences=numbered((s.id, s.text) for s in sentences),
                signature=signature,
                config=reply_bound(self.tokens_per_sentence and 32 + self.tokens_per_sentence * n),
            )
            scores = [int(v) for v in out.scores]
            if len(scores) != n:
                raise StageOutputError(f"{len(scores)} scores for {n} sentences")
            if any(v not in LIKERT for v in scores):
                raise StageOutputError(f"scores outside 1-5: {sorted(set(scores) - set(LIKERT))}")
        except RECOVERABLE as exc:
            ids = [s.id for s in sentences[: self.fallback_count]]
            return dspy.Prediction(evidence_ids=ids, scores=None, selection="fallback_first_n", fallback=describe(exc))
        ids, selection = self.select(sentences, scores)
        return dspy.Prediction(
            evidence_ids=ids, scores=dict(zip([s.id for s in sentences], scores, strict=True)),
            selection=selection, fallback=None,
        )
