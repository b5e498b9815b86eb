"""What the learned evidence and alignment heads and their fits share: overrides of the fitted selection rule, the
rule in use, the training cases a fit reads."""

from __future__ import annotations

from functools import partial
from typing import Any

import dspy

from common.errors import ConfigError, number_in
from common.parameters import LearnedStateError, LogisticHead
from tasks.archehr.data import Case, KeyCase

# a configured override of a fitted selection rule: a number (its bounds), or null (the fitted value)
override = partial(number_in, null=True, note="the fitted value")


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
