"""MedFinalParser: restore the note's writing style in the accepted correction."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, failure_reason
from common.markup import strip_markup
from signatures.constrained import with_output_schema
from signatures.mediqa_corr import MedFinalParse


class MedFinalParser(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parse = dspy.Predict(MedFinalParse)

    def forward(self, original_sentence: str, proposed_correction: str) -> dspy.Prediction:
        try:
            limit = max(200, 2 * len(original_sentence))
            signature = with_output_schema(self.parse.signature, "corrected_sentence", {"type": "string", "maxLength": limit})
            out = self.parse(original_sentence=original_sentence, proposed_correction=proposed_correction,
                             signature=signature)
            text, repaired = strip_markup(out.corrected_sentence or "")  # the submitted sentence: whitespace collapsed
            return dspy.Prediction(corrected_sentence=text or proposed_correction, fallback=None,
                                   repairs=int(repaired))
        except RECOVERABLE as exc:
            return dspy.Prediction(corrected_sentence=proposed_correction, fallback=failure_reason(exc), repairs=0)
