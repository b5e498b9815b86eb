"""MedReFlex: after a failed episode, reflect on the history and the reviews; the lesson goes to memory."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, failure_reason
from common.markup import without_markup
from signatures.constrained import with_output_schema
from signatures.mediqa_corr import MedReflect


class MedReFlex(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.reflect = dspy.Predict(MedReflect)

    def forward(self, clinical_text: str, history: str, feedback: str) -> dspy.Prediction:
        try:
            signature = with_output_schema(self.reflect.signature, "reflection", {"type": "string", "maxLength": 500})
            out = self.reflect(clinical_text=clinical_text, history=history, feedback=feedback, signature=signature)
            # the agent reads the reflection in its next prompts: unchanged when it has no markup
            reflection, repaired = without_markup(out.reflection)
            return dspy.Prediction(reflection=reflection.strip() or feedback, fallback=None, repairs=int(repaired))
        except RECOVERABLE as exc:
            return dspy.Prediction(reflection=f"Previous attempt failed: {feedback}", fallback=failure_reason(exc),
                                   repairs=0)
