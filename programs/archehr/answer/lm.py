"""Stage 3: a grounded answer from the selected evidence, limited to 75 words by the soft cut."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, StageOutputError, failure_reason
from common.markup import strip_markup
from programs.archehr.text import check_answer_limits, numbered, soft_cut
from signatures.archehr import GenerateAnswer, with_limits
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import NoteSentence


class LMAnswer(dspy.Module):
    uses_lm = True

    def __init__(self, max_words: int, soft_cut_ratio: float, max_tokens: int | None = None) -> None:
        super().__init__()
        check_answer_limits(max_words, soft_cut_ratio)
        self.max_words = max_words
        self.max_tokens = max_tokens
        self.soft_cut_ratio = soft_cut_ratio
        self.generate = dspy.Predict(with_limits(GenerateAnswer, max_words=max_words))

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str) -> dspy.Prediction:
        # Bound decoding to ~1.3x the word limit in characters; the soft cut then applies the exact limit.
        signature = with_output_schema(self.generate.signature, "answer",
                                       {"type": "string", "maxLength": int(1.3 * 8 * self.max_words)})
        try:
            out = self.generate(
                clinician_question=clinician_question,
                evidence=numbered((s.id, s.text) for s in evidence),
                note_excerpt=note_excerpt,
                signature=signature,
                config=reply_bound(self.max_tokens),
            )
            # Before the soft cut, so the 75-word limit counts clean words.
            raw, repaired = strip_markup(out.answer or "")
            if not raw:
                raise StageOutputError("empty answer" + (" once markup was stripped" if repaired else ""))
            fallback = None
        except RECOVERABLE as exc:
            # Extractive fallback: the evidence sentences themselves, so the answer stays grounded.
            raw, repaired = " ".join(s.text for s in evidence), False
            fallback = failure_reason(exc)
        return dspy.Prediction(answer=soft_cut(raw, self.max_words, self.soft_cut_ratio), fallback=fallback,
                               repairs=int(repaired))
