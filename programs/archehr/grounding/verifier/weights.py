"""The verifier's learned weights as a DSPy parameter: a multinomial logistic head over `features.py`'s features
(standardised), one output per label (supported, the kinds of conflict, not in the note), with the encoder the
features were computed with, the flag threshold chosen on validation and what the fit measured. Plain JSON: data,
never pickle; loading checks labels, feature names, shapes and finiteness and fails in one line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from common.parameters import FittedParameter, LearnedStateError, _floats, check_standardised

VERIFIER_FORMAT = "clinprog-verifier/1"


class VerifierWeights(FittedParameter):
    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = tuple(labels)
        self.features: tuple[str, ...] = ()
        self.encoder = ""
        self.mean: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.coef: np.ndarray | None = None       # (labels, features)
        self.intercept: np.ndarray | None = None  # (labels,)
        self.threshold = 0.5
        self.fit: dict[str, Any] = {}

    @property
    def fitted(self) -> bool:
        return self.coef is not None

    def set(self, features: tuple[str, ...], encoder: str, mean: Any, scale: Any, coef: Any, intercept: Any,
            threshold: float, fit: dict[str, Any] | None = None) -> VerifierWeights:
        where = "the verifier's weights"
        n, k = len(features), len(self.labels)
        mean, scale = (np.asarray(x, dtype=float).reshape(-1) for x in (mean, scale))
        coef, intercept = np.asarray(coef, dtype=float), np.asarray(intercept, dtype=float).reshape(-1)
        if mean.shape != (n,) or scale.shape != (n,) or coef.shape != (k, n) or intercept.shape != (k,):
            raise LearnedStateError(f"{where}: expected mean and scale of {n} numbers, coef {k} x {n} and {k} "
                                    f"intercepts (one per label {list(self.labels)})")
        check_standardised(where, mean, scale, coef, intercept)
        if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
            raise LearnedStateError(f"{where}: threshold must be in [0, 1], not {threshold!r}")
        self.features, self.encoder = tuple(features), str(encoder)
        self.mean, self.scale, self.coef, self.intercept = mean, scale, coef, intercept
        self.threshold, self.fit = float(threshold), dict(fit or {})
        return self

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """(rows, labels) softmax probabilities of feature rows."""
        if not self.fitted:
            raise LearnedStateError("the verifier is not fitted (load a compiled program or run task=compile "
                                    "experiment=compile_verifier)")
        z = ((np.atleast_2d(x) - self.mean) / self.scale) @ self.coef.T + self.intercept
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        if not self.fitted:
            return {"format": VERIFIER_FORMAT, "fitted": False}
        return {"format": VERIFIER_FORMAT, "labels": list(self.labels), "encoder": self.encoder,
                "features": list(self.features), "mean": _floats(self.mean), "scale": _floats(self.scale),
                "coef": [_floats(row) for row in self.coef], "intercept": _floats(self.intercept),
                "threshold": round(self.threshold, 6), "fit": self.fit}

    def load_state(self, state: Any) -> VerifierWeights:
        where = "the verifier's weights"
        if not isinstance(state, dict) or state.get("format") != VERIFIER_FORMAT:
            raise LearnedStateError(f"{where}: not a {VERIFIER_FORMAT!r} state")
        if state.get("fitted") is False:
            self.coef = None
            return self
        if tuple(state.get("labels") or ()) != self.labels:
            raise LearnedStateError(f"{where}: fitted for labels {state.get('labels')}, this code uses "
                                    f"{list(self.labels)}; fit it again (task=compile experiment=compile_verifier)")
        try:
            return self.set(tuple(str(f) for f in state["features"]), str(state["encoder"]), state["mean"],
                            state["scale"], state["coef"], state["intercept"], state["threshold"],
                            state.get("fit") if isinstance(state.get("fit"), dict) else {})
        except LearnedStateError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise LearnedStateError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
