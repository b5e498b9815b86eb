"""Stage 1: patient narrative -> clinician question (<= 15 words)."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, StageOutputError, failure_reason
from common.markup import strip_markup
from programs.archehr.text import last_question_sentence, truncate_words, whole_sentences
from signatures.archehr import InterpretQuestion, with_limits
from signatures.constrained import reply_bound, with_output_schema


class LMQuestion(dspy.Module):
    uses_lm = True

    def __init__(self, max_words: int, demos: list[dspy.Example] | None = None, max_tokens: int | None = None) -> None:
        super().__init__()
        self.max_words = max_words
        self.max_tokens = max_tokens  # bounds the reply (null: the LM's max_tokens)
        self.interpret = dspy.Predict(with_limits(InterpretQuestion, max_words=max_words))
        # curated demos are configuration: kept outside the predictor so an optimizer's reset_copy() cannot drop them
        self.curated_demos = list(demos or [])

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        # ~12 characters a word bounds decoding; the predictor's current signature keeps an optimizer's instructions
        signature = with_output_schema(self.interpret.signature, "clinician_question",
                                       {"type": "string", "maxLength": 12 * self.max_words})
        try:
            out = self.interpret(patient_narrative=patient_narrative, patient_question=patient_question or "(none)",
                                 signature=signature, demos=[*self.curated_demos, *self.interpret.demos],
                                 config=reply_bound(self.max_tokens))
            # Before the word limit, so the limit counts clean words (a leaked ```json {" is not 2 of 15 words).
            raw, repaired = strip_markup(out.clinician_question or "")
            if not raw:
                raise StageOutputError("empty clinician question" + (" once markup was stripped" if repaired else ""))
            return dspy.Prediction(clinician_question=whole_sentences(raw, self.max_words), fallback=None,
                                   repairs=int(repaired))
        except RECOVERABLE as exc:
            # The patient's own last question, truncated: never an invented question.
            rule = last_question_sentence(patient_question or patient_narrative)
            return dspy.Prediction(clinician_question=truncate_words(rule, self.max_words), fallback=failure_reason(exc),
                                   repairs=0)
