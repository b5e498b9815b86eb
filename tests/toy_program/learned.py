"""The toy program's learned stage: fever when the note's highest temperature reaches a cutoff fitted on labelled
notes. It says how it is fitted (`fit`), so `task=compile optimizer=fit` fits it with no change to optimizers/."""

from __future__ import annotations

import re
from typing import Any

import dspy

from common.parameters import FittedParameter, LearnedStateError

_TEMPERATURE = re.compile(r"\b(3[4-9]|4[0-3])\.\d\b")  # degrees Celsius as notes write them


def highest_temperature(note: str) -> float | None:
    found = [float(m.group()) for m in _TEMPERATURE.finditer(note)]
    return max(found) if found else None


class Cutoff(FittedParameter):
    def __init__(self) -> None:
        self.value: float | None = None

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        return {"format": "toy-cutoff/1", "cutoff": self.value}

    def load_state(self, state: Any) -> Cutoff:
        if not isinstance(state, dict) or state.get("format") != "toy-cutoff/1":
            raise LearnedStateError("the fever cutoff: not a 'toy-cutoff/1' state")
        value = state.get("cutoff")
        if value is not None and not isinstance(value, (int, float)):
            raise LearnedStateError(f"the fever cutoff must be a number or null, not {value!r}")
        self.value = None if value is None else float(value)
        return self


class TemperatureCutoff(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cutoff = Cutoff()

    def forward(self, note: str) -> str | None:
        """"yes" / "no" when fitted and the note states a temperature; None otherwise (the LM decides)."""
        highest = highest_temperature(note)
        if self.cutoff.value is None or highest is None:
            return None
        return "yes" if highest >= self.cutoff.value else "no"

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example]) -> dict[str, Any]:
        """The cutoff among the training notes' temperatures that tags most of them right (ties: the lowest)."""
        labelled = [(highest_temperature(ex.note), ex.fever) for ex in trainset]
        labelled = [(t, y) for t, y in labelled if t is not None]
        if not labelled:
            return {"refused": "no training note states a temperature"}
        candidates = sorted({t for t, _ in labelled})
        best = max(candidates, key=lambda c: (sum((t >= c) == (y == "yes") for t, y in labelled), -c))
        self.cutoff.value = best
        right = sum((t >= best) == (y == "yes") for t, y in labelled)
        return {"cutoff": best, "notes_with_a_temperature": len(labelled), "right": right}
