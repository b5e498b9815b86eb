"""MedEval: independent reviews of a proposal, one per criterion (optionally several samples each), accepted when
the average score >= avg_threshold and the minimum >= min_threshold (the published code's running "min" was wrong)."""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from common.errors import ConfigError, number_in
from common.failures import RECOVERABLE, failure_reason
from common.markup import without_markup
from signatures.constrained import with_output_schema
from signatures.mediqa_corr import MedEvalReview
from tasks.mediqa_corr.data import Note


@dataclass
class Review:
    criterion: str
    score: int | None
    reasoning: str


def accept(scores: list[int], avg_threshold: float, min_threshold: float) -> bool:
    return bool(scores) and sum(scores) / len(scores) >= avg_threshold and min(scores) >= min_threshold


class MedEval(dspy.Module):
    def __init__(self, criteria: dict[str, str], samples: int, avg_threshold: float, min_threshold: float,
                 temperature: float) -> None:
        super().__init__()
        if not criteria:
            raise ConfigError("program.eval.criteria: MedEval needs at least one criterion")
        for key, value in (("avg_threshold", avg_threshold), ("min_threshold", min_threshold)):
            number_in(f"program.eval.{key}", value, 1, 5, note="a review scores 1-5")
        number_in("program.eval.samples", samples, 1, integer=True)
        number_in("program.eval.temperature", temperature, 0, 2)
        self.criteria = dict(criteria)
        self.samples, self.temperature = samples, temperature
        self.avg_threshold, self.min_threshold = avg_threshold, min_threshold
        self.review = dspy.Predict(MedEvalReview)

    def forward(self, note: Note, sentence_id: int, corrected: str) -> dspy.Prediction:
        proposal = f"Sentence [{sentence_id}]: {note.sentence(sentence_id)}\nProposed correction: {corrected}"
        signature = with_output_schema(self.review.signature, "score", {"type": "integer", "enum": [1, 2, 3, 4, 5]})
        signature = with_output_schema(signature, "reasoning", {"type": "string", "maxLength": 400})
        reviews: list[Review] = []
        repairs = 0
        for name, definition in self.criteria.items():
            for sample in range(self.samples):
                # several samples of one criterion are distinct rollouts (not cache hits) at temperature > 0
                config = {"rollout_id": sample, "temperature": self.temperature} if self.samples > 1 else {}
                try:
                    out = self.review(clinical_text=note.numbered(), proposal=proposal,
                                      criterion=f"{name}: {definition}", signature=signature, config=config)
                    score = int(out.score)
                    reasoning, repaired = without_markup(out.reasoning)  # also read by MedReFlex: unchanged if clean
                    repairs += repaired
                    reviews.append(Review(name, score if 1 <= score <= 5 else None, reasoning))
                except RECOVERABLE as exc:
                    reviews.append(Review(name, None, f"unparsable review: {failure_reason(exc)}"))
        # An unparsable review counts as the lowest score: an unreviewed answer is not accepted by default.
        scores = [r.score if r.score is not None else 1 for r in reviews]
        return dspy.Prediction(reviews=reviews, scores=scores, repairs=repairs,
                               parse_failures=sum(r.score is None for r in reviews),
                               accepted=accept(scores, self.avg_threshold, self.min_threshold))
