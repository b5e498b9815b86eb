"""The saved state of the learned non-LLM stages: a logistic scorer per stage and its selection rule, with meta.

One JSON file holds every fitted stage (`stages.evidence`, `stages.alignment`) and a `meta` block (feature sets,
library versions, the embedder, the training data's hash, the metric before and after fitting): like a DSPy state,
it is data, never pickle. A stage loads its own part and refuses, in one line, a state fitted for another feature
set or embedder: its weights would be read against the wrong columns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import ClinprogError

STATE_FORMAT = "clinprog-offline-state/1"


class LearnedStateError(ClinprogError, ValueError):
    """A fitted state that is missing, malformed or fitted for other features than this code computes."""


@dataclass(frozen=True)
class LogisticScorer:
    """P(label | features) = sigmoid(intercept + coef . (x - mean) / scale): sklearn's LogisticRegression on
    standardised features, kept as plain numbers so reading a state needs numpy only."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.zeros(x.shape[:-1])
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def to_json(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": _floats(self.mean), "scale": _floats(self.scale),
                "coef": _floats(self.coef), "intercept": round(float(self.intercept), 8)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LogisticScorer:
        n = len(data["features"])
        arrays = [np.asarray(data[k], dtype=float) for k in ("mean", "scale", "coef")]
        if any(a.shape != (n,) for a in arrays) or not all(np.isfinite(a).all() for a in arrays):
            raise ValueError("mean, scale and coef must be finite lists as long as features")
        if not math.isfinite(float(data["intercept"])):
            raise ValueError("intercept must be finite")
        return cls(tuple(data["features"]), *arrays, float(data["intercept"]))


def _floats(values: np.ndarray) -> list[float]:
    return [round(float(v), 8) for v in values]


@dataclass(frozen=True)
class StageState:
    scorer: LogisticScorer
    selection: dict[str, Any]
    feature_set: str
    embedder: str


def load_stage_state(path: str | Path, stage: str, feature_set: str, features: tuple[str, ...], embedder: str,
                     where: str) -> StageState:
    """The fitted part of `stage` in the state file at `path`, checked against the features this code computes and
    the embedder in use; any mismatch is one LearnedStateError line naming `where` (e.g. program.evidence.state_path)."""
    path = Path(path)
    refit = ("fit one for this code: python -m optimizers.offline_fit --cases <cases.xml> --key <key.json> --out "
             "<state.json>, or task=compile (README: compiling the non-LLM stages)")
    if not path.is_file():
        raise LearnedStateError(f"{where}={path}: no such file; {refit}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LearnedStateError(f"{where}={path}: not a JSON state ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise LearnedStateError(f"{where}={path}: not a clinprog offline state (format {STATE_FORMAT!r} expected)")
    part = (data.get("stages") or {}).get(stage)
    if not isinstance(part, dict):
        raise LearnedStateError(f"{where}={path}: holds no fitted {stage} stage (it has "
                                f"{sorted(data.get('stages') or {})}); {refit}")
    if part.get("feature_set") != feature_set or tuple(part.get("scorer", {}).get("features", ())) != features:
        raise LearnedStateError(f"{where}={path}: fitted for feature set {part.get('feature_set')!r}, this code "
                                f"computes {feature_set!r} ({len(features)} features); {refit}")
    if part.get("embedder") != embedder:
        raise LearnedStateError(f"{where}={path}: fitted with embedder {part.get('embedder')!r}, this program uses "
                                f"{embedder!r}; {refit}")
    try:
        scorer = LogisticScorer.from_json(part["scorer"])
    except (KeyError, TypeError, ValueError) as exc:
        raise LearnedStateError(f"{where}={path}: malformed {stage} scorer ({exc})") from None
    return StageState(scorer, dict(part.get("selection") or {}), feature_set, embedder)


def save_state(path: str | Path, stages: dict[str, dict[str, Any]], meta: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": STATE_FORMAT, "stages": stages, "meta": meta}, indent=1) + "\n")
    return path
