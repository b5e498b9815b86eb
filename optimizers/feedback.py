"""Optimizer metrics in GEPA's form. Each program declares its own metrics (`ProgramContract.objectives`) and
feedback (`ProgramContract.feedback`); `with_feedback` joins the two for reflective optimizers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy


def with_feedback(metric: Callable[..., float], describe: Callable[[Any, Any, float], str] | None = None):
    """GEPA's metric form: a score plus textual feedback the reflection LM can act on."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        value = float(metric(gold, pred, trace))
        text = describe(gold, pred, value) if describe else f"score {value:.3f} (1.0 is a perfect match)"
        return dspy.Prediction(score=value, feedback=text)

    return gepa_metric
