"""MedEval: independent reviews of a proposal, one per criterion (optionally several samples each).

Accept when the average of all scores >= avg_threshold and the true minimum >= min_threshold (the published
implementation computed a running "min" wrongly; this uses the real minimum).
"""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from programs.archehr.failures import RECOVERABLE, describe
from signatures.constrained import with_output_schema
from signatures.mediqa_corr import MedEvalReview
from tasks.mediqa_corr.data import Note

CRITERIA = {
    "validity": "the corrected sentence is medically valid and consistent with the rest of the text",
    "preciseness": "the correction changes only what is wrong, precisely",
    "confidence": "the evidence in the text and the search results supports the claimed error with confidence",
    "relevance": "the sentence judged wrong really is the erroneous one",
    "completeness": "the correction fully fixes the error",
}


@dataclass
class Review:
    criterion: str
    score: int | None
    reasoning: str


def accept(scores: list[int], avg_threshold: float, min_threshold: float) -> bool:
    return bool(scores) and sum(scores) / len(scores) >= avg_threshold and min(scores) >= min_threshold


class MedEval(dspy.Module):
    def __init__(self, criteria: dict[str, str] | None = None, samples: int = 1, avg_threshold: float = 3.8,
                 min_threshold: float = 3, temperature: float = 1.0) -> None:
        super().__init__()
        self.criteria = dict(criteria or CRITERIA)
        self.samples, self.temperature = samples, temperature
        self.avg_threshold, self.min_threshold = avg_threshold, min_threshold
        self.review = dspy.Predict(MedEvalReview)

    def forward(self, note: Note, sentence_id: int, corrected: str) -> dspy.Prediction:
        proposal = f"Sentence [{sentence_id}]: {note.sentence(sentence_id)}\nProposed correction: {corrected}"
        signature = with_output_schema(self.review.signature, "score", {"type": "integer", "enum": [1, 2, 3, 4, 5]})
        signature = with_output_schema(signature, "reasoning", {"type": "string", "maxLength": 400})
        reviews: list[Review] = []
        for name, definition in self.criteria.items():
            for sample in range(self.samples):
                # several samples of one criterion are distinct rollouts (not cache hits) at temperature > 0
                config = {"rollout_id": sample, "temperature": self.temperature} if self.samples > 1 else {}
                try:
                    out = self.review(clinical_text=note.numbered(), proposal=proposal,
                                      criterion=f"{name}: {definition}", signature=signature, config=config)
                    score = int(out.score)
                    reviews.append(Review(name, score if 1 <= score <= 5 else None, out.reasoning))
                except RECOVERABLE as exc:
                    reviews.append(Review(name, None, f"unparsable review: {describe(exc)}"))
        # An unparsable review counts as the lowest score: an unreviewed answer is not accepted by default.
        scores = [r.score if r.score is not None else 1 for r in reviews]
        return dspy.Prediction(reviews=reviews, scores=scores,
                               accepted=accept(scores, self.avg_threshold, self.min_threshold))
