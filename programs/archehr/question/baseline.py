"""Stage 1 by a trivial baseline: a sentence of the message, cut to `max_words`. What a learned stage must beat, and
the LM stage's no-LM fallback: the patient's own words, never an invented question."""

from __future__ import annotations

import dspy

from common.errors import ConfigError, number_in
from programs.archehr.question.text import BASELINES, normalise_message
from programs.archehr.text import truncate_words


class BaselineQuestion(dspy.Module):
    uses_lm = False

    def __init__(self, max_words: int = 15, method: str = "first question sentence") -> None:
        super().__init__()
        if method not in BASELINES:
            raise ConfigError(f"program.question.method must be one of {sorted(BASELINES)}, not {method!r}")
        self.max_words, self.method = number_in("program.question.max_words", max_words, 1, integer=True), method

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        message = normalise_message(patient_narrative or "")
        question = truncate_words(BASELINES[self.method](message), self.max_words) if message else ""
        return dspy.Prediction(clinician_question=question, fallback=None)
