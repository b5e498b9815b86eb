"""Stage 3: a grounded answer from the selected evidence, limited to 75 words by the soft cut."""

from __future__ import annotations

import dspy

from programs.archehr.failures import RECOVERABLE, StageOutputError, describe
from programs.archehr.text import numbered, soft_cut
from signatures.archehr import GenerateAnswer
from tasks.archehr.data import NoteSentence


class AnswerGenerator(dspy.Module):
    def __init__(self, max_words: int = 75, soft_cut_ratio: float = 0.6) -> None:
        super().__init__()
        self.max_words = max_words
        self.soft_cut_ratio = soft_cut_ratio
        self.generate = dspy.Predict(GenerateAnswer)

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str) -> dspy.Prediction:
        try:
            out = self.generate(
                clinician_question=clinician_question,
                evidence=numbered((s.id, s.text) for s in evidence),
                note_excerpt=note_excerpt,
            )
            raw = (out.answer or "").strip()
            if not raw:
                raise StageOutputError("empty answer")
            fallback = None
        except RECOVERABLE as exc:
            # Extractive fallback: the evidence sentences themselves, so the answer stays grounded.
            raw = " ".join(s.text for s in evidence)
            fallback = describe(exc)
        return dspy.Prediction(answer=soft_cut(raw, self.max_words, self.soft_cut_ratio), fallback=fallback)
