"""The toy program's module: one predictor, run under its role's LM (an LM per role, as every program does)."""

from __future__ import annotations

import contextlib

import dspy
from dspy.utils.exceptions import AdapterParseError

from tests.toy_program.learned import TemperatureCutoff
from tests.toy_program.signature import TagFever


class FeverTagger(dspy.Module):
    def __init__(self, default_label: str = "no", role_lms: dict[str, dspy.LM] | None = None) -> None:
        super().__init__()
        self.default_label = default_label  # the answer when the LM output does not parse
        self.tag = dspy.Predict(TagFever)
        self.cutoff = TemperatureCutoff()  # learned (optimizer=fit); until fitted, the LM decides every note
        self._role_lms = dict(role_lms or {})  # a runtime resource, not program state

    def forward(self, note: str) -> dspy.Prediction:
        learned = self.cutoff(note)
        if learned is not None:
            return dspy.Prediction(fever=learned, fallback=None)
        lm = self._role_lms.get("tagger")
        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            try:
                return dspy.Prediction(fever=self.tag(note=note).fever, fallback=None)
            except AdapterParseError as exc:
                return dspy.Prediction(fever=self.default_label, fallback=type(exc).__name__)
