"""What the learned evidence and alignment heads and their fits share: overrides of the fitted selection rule, the
rule in use, the training cases a fit reads."""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError
from common.parameters import LearnedStateError, LogisticHead
from tasks.archehr.data import Case, KeyCase


def check_override(where: str, name: str, value: Any, low: float, high: float | None, integer: bool = False) -> Any:
    """A configured override: a number in [low, high] (an integer when `integer`), or None (the fitted value)."""
    if value is None:
        return None
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok or value < low or (high is not None and value > high) or value != value:
        bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{where}.{name} must be {'an integer' if integer else 'a number'} {bounds} or null (the "
                          f"fitted value), not {value!r}")
    return value


def fitted_selection(head: LogisticHead, overrides: dict[str, Any], where: str) -> dict[str, Any]:
    """The selection rule in use: each configured value, else the head's fitted one."""
    if not head.fitted:
        raise LearnedStateError(f"{where} (learned): its scorer is not fitted; load a compiled program "
                                "(program.compiled=PATH, the shipped one by default) or fit one: task=compile "
                                "optimizer=logistic")
    out = {}
    for name, value in overrides.items():
        chosen = value if value is not None else head.selection.get(name)
        if chosen is None:
            raise LearnedStateError(f"{where}.{name}: not in the fitted state and not set")
        out[name] = chosen
    return out


def training_cases(trainset: list[dspy.Example], who: str) -> tuple[list[Case], dict[str, KeyCase]]:
    """The training cases with a note and a key, and the key; none is one line naming `who` fits."""
    key = {ex.case.case_id: ex.key for ex in trainset if getattr(ex, "key", None) is not None}
    cases = [ex.case for ex in trainset if ex.case.case_id in key and ex.case.sentences]
    if not cases:
        raise ConfigError(f"{who}: no training case has a note and a key (data.train, data.train_key)")
    return cases, key
