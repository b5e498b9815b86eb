"""Learned weights as DSPy parameters, saved and loaded with the program like a Predict's demos: a logistic head over
features and a fine-tuned LM's low-rank adapter. Their state is plain JSON (numbers, base64 of float16 arrays), never
pickle; loading checks shapes and finiteness and fails in one line."""

from __future__ import annotations

import base64
import hashlib
import math
import re
from typing import Any

import numpy as np
from dspy.predict.parameter import Parameter

from common.errors import ClinprogError

LOGISTIC_FORMAT = "clinprog-logistic/1"
LORA_FORMAT = "clinprog-lora/1"
LORA_MAX_RANK = 256
LORA_MAX_INPUT_TOKENS = 4096
LORA_MAX_TENSORS = 4096
LORA_MAX_INSTRUCTION_CHARS = 4000
LORA_MAX_SCALE = 64.0  # alpha / rank; training uses 2
_ADAPTED_LAYER = re.compile(r"model\.layers\.\d{1,4}\.(?:self_attn\.(?:q|k|v|o)_proj|mlp\.(?:gate|up|down)_proj)")


class LearnedStateError(ClinprogError, ValueError):
    """A learned parameter's state that is missing, malformed or fitted for other features than this code computes."""


def _floats(values: np.ndarray) -> list[float]:
    return [float(f"{float(v):.9g}") for v in np.asarray(values).reshape(-1)]  # 9 significant digits: no tiny scale becomes 0


class FittedParameter(Parameter):
    """Weights a stage's own `fit` (or optimizer=finetune) learns: DSPy's prompt optimizers' `reset()` keeps them."""

    def reset(self) -> None:
        return None


class LogisticHead(FittedParameter):
    """P(label | x) = sigmoid(intercept + coef . (x - mean) / scale), with the selection rule fitted with it.
    A state fitted for other columns than `features` is refused; `fit` keeps what the optimizer measured."""

    def __init__(self, feature_set: str, features: tuple[str, ...], embedder: str | None = None) -> None:
        self.feature_set = feature_set
        self.features = tuple(features)
        self.embedder = embedder
        self.mean: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.coef: np.ndarray | None = None
        self.intercept = 0.0
        self.selection: dict[str, Any] = {}
        self.fit: dict[str, Any] = {}

    @property
    def fitted(self) -> bool:
        return self.coef is not None

    def set(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float,
            selection: dict[str, Any] | None = None, fit: dict[str, Any] | None = None) -> LogisticHead:
        n = len(self.features)
        arrays = [np.asarray(a, dtype=float).reshape(-1) for a in (mean, scale, coef)]
        if any(a.shape != (n,) for a in arrays):
            raise LearnedStateError(f"{self.feature_set}: mean, scale and coef must hold {n} numbers each")
        if not all(np.isfinite(a).all() for a in arrays) or not math.isfinite(float(intercept)):
            raise LearnedStateError(f"{self.feature_set}: mean, scale, coef and intercept must be finite")
        if (np.abs(arrays[1]) < 1e-12).any():
            raise LearnedStateError(f"{self.feature_set}: a scale of 0 divides by zero (every scale must be non-zero)")
        self.mean, self.scale, self.coef = arrays
        self.intercept = float(intercept)
        self.selection = dict(selection or {})
        self.fit = dict(fit or {})
        return self

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        if not self.fitted:
            raise LearnedStateError(f"{self.feature_set}: not fitted (load a compiled program or run task=compile)")
        if x.size == 0:
            return np.zeros(x.shape[:-1])
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        if not self.fitted:
            return {"format": LOGISTIC_FORMAT, "feature_set": self.feature_set, "fitted": False}
        return {"format": LOGISTIC_FORMAT, "feature_set": self.feature_set, "features": list(self.features),
                "embedder": self.embedder, "mean": _floats(self.mean), "scale": _floats(self.scale),
                "coef": _floats(self.coef), "intercept": round(self.intercept, 8),
                "selection": {k: float(v) if isinstance(v, float) else v for k, v in self.selection.items()},
                "fit": self.fit}

    def load_state(self, state: Any) -> LogisticHead:
        where = f"the {self.feature_set} head"
        if not isinstance(state, dict) or state.get("format") != LOGISTIC_FORMAT:
            raise LearnedStateError(f"{where}: not a {LOGISTIC_FORMAT!r} state")
        if state.get("fitted") is False:
            self.coef = None
            return self
        if state.get("feature_set") != self.feature_set or tuple(state.get("features") or ()) != self.features:
            theirs = list(state.get("features") or ())
            added = [f for f in self.features if f not in theirs][:5]
            dropped = [f for f in theirs if f not in self.features][:5]
            raise LearnedStateError(
                f"{where}: fitted for feature set {state.get('feature_set')!r} with {len(theirs)} features, this code "
                f"computes {self.feature_set!r} with {len(self.features)}" +
                (f" (new here: {added})" if added else "") + (f" (not computed here: {dropped})" if dropped else "")
                + ("" if added or dropped else " (same names, another order)") + "; fit it again (task=compile)")
        if self.embedder is not None and state.get("embedder") != self.embedder:
            raise LearnedStateError(f"{where}: fitted with embedder {state.get('embedder')!r}, this program uses "
                                    f"{self.embedder!r}; fit it again (task=compile)")
        selection = state.get("selection") or {}
        if not isinstance(selection, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                      and math.isfinite(v) for v in selection.values()):
            raise LearnedStateError(f"{where}: selection must map names to finite numbers, not {selection!r}")
        try:
            values = [np.asarray(state[k], dtype=float) for k in ("mean", "scale", "coef")]
            intercept = float(state["intercept"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LearnedStateError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
        return self.set(*values, intercept, selection, state.get("fit") if isinstance(state.get("fit"), dict) else {})


def _pack(array: np.ndarray) -> dict[str, Any]:
    a = np.ascontiguousarray(array, dtype=np.float16)
    return {"shape": list(a.shape), "float16": base64.b64encode(a.tobytes()).decode("ascii")}


def _unpack(data: Any, where: str) -> np.ndarray:
    try:
        shape = tuple(int(x) for x in data["shape"])
        raw = base64.b64decode(data["float16"], validate=True)
        array = np.frombuffer(raw, dtype=np.float16).reshape(shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise LearnedStateError(f"{where}: malformed tensor ({type(exc).__name__}: {exc})") from None
    if not np.isfinite(array).all():
        raise LearnedStateError(f"{where}: a tensor holds NaN or infinity")
    return array


def _frozen(array: Any) -> np.ndarray:
    """A float16 copy nobody can edit in place (the adapter's id is kept while its arrays are the same objects)."""
    out = np.array(array, dtype=np.float16)
    out.setflags(write=False)
    return out


class LoraAdapter(FittedParameter):
    """A fine-tuned LM's low-rank adapter: per adapted linear layer A (rank x in) and B (out x rank), merged as
    W + (alpha / rank) B A, with the prompts and input budget it was trained with."""

    def __init__(self) -> None:
        self.tensors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.rank = 0
        self.alpha = 0.0
        self.base: dict[str, Any] = {}
        self.instructions: dict[str, str] = {}
        self.max_input_tokens = 0
        self.fit: dict[str, Any] = {}
        self._id_cache: tuple[tuple, list, str] | None = None  # (rank, alpha and the arrays' ids; the arrays; the id)

    @property
    def fitted(self) -> bool:
        return bool(self.tensors)

    @property
    def scale(self) -> float:
        return self.alpha / self.rank if self.rank else 0.0

    @property
    def adapter_id(self) -> str:
        """A digest of the tensors and the scale: names the merged model. Hashing ~13 MB took ~14 ms per message, so it
        is kept while the very same (read-only) arrays and scale are in place."""
        arrays = [(name, *self.tensors[name]) for name in sorted(self.tensors)]
        key = (self.rank, self.alpha, [(name, id(a), id(b)) for name, a, b in arrays])
        if self._id_cache is None or self._id_cache[0] != key:
            digest = hashlib.sha256()
            for name, a, b in arrays:
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(a, dtype=np.float16).tobytes())
                digest.update(np.ascontiguousarray(b, dtype=np.float16).tobytes())
            digest.update(repr((self.rank, self.alpha)).encode())
            self._id_cache = (key, arrays, digest.hexdigest()[:16])  # holding the arrays: no other array gets their ids
        return self._id_cache[2]

    def set(self, tensors: dict[str, tuple[np.ndarray, np.ndarray]], rank: int, alpha: float, base: dict[str, Any],
            instructions: dict[str, str], max_input_tokens: int, fit: dict[str, Any] | None = None) -> LoraAdapter:
        self.tensors = {k: (_frozen(a), _frozen(b)) for k, (a, b) in tensors.items()}
        self.rank, self.alpha, self.base = int(rank), float(alpha), dict(base)
        self.instructions, self.max_input_tokens, self.fit = dict(instructions), int(max_input_tokens), dict(fit or {})
        return self

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        if not self.fitted:
            return {"format": LORA_FORMAT, "fitted": False}
        return {"format": LORA_FORMAT, "rank": self.rank, "alpha": self.alpha, "base": self.base,
                "instructions": self.instructions, "max_input_tokens": self.max_input_tokens,
                "adapter_id": self.adapter_id, "fit": self.fit,
                "tensors": {name: {"a": _pack(a), "b": _pack(b)} for name, (a, b) in sorted(self.tensors.items())}}

    def load_state(self, state: Any) -> LoraAdapter:
        where = "the question stage's adapter"
        if not isinstance(state, dict) or state.get("format") != LORA_FORMAT:
            raise LearnedStateError(f"{where}: not a {LORA_FORMAT!r} state")
        if state.get("fitted") is False:
            self.tensors = {}
            return self
        try:
            rank, alpha = int(state["rank"]), float(state["alpha"])
            instructions = {str(k): str(v) for k, v in dict(state["instructions"]).items()}
            budget = int(state["max_input_tokens"])
            raw = dict(state["tensors"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LearnedStateError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
        if rank < 1 or not math.isfinite(alpha) or budget < 8 or not raw or not instructions:
            raise LearnedStateError(f"{where}: rank >= 1, a finite alpha, max_input_tokens >= 8, tensors and "
                                    "instructions are required")
        # every size a state file sets is bounded; the scale must keep W + scale * B A finite in float16
        bounds = {"rank": (rank, LORA_MAX_RANK), "max_input_tokens": (budget, LORA_MAX_INPUT_TOKENS),
                  "tensors": (len(raw), LORA_MAX_TENSORS), "instructions": (len(instructions), 8)}
        for what, (value, high) in bounds.items():
            if value > high:
                raise LearnedStateError(f"{where}: {what} is {value}, at most {high} is accepted")
        longest = max(len(text) for text in instructions.values())
        if longest > LORA_MAX_INSTRUCTION_CHARS:
            raise LearnedStateError(f"{where}: an instruction of {longest} characters (at most "
                                    f"{LORA_MAX_INSTRUCTION_CHARS})")
        if not 0 < abs(alpha / rank) <= LORA_MAX_SCALE:
            raise LearnedStateError(f"{where}: alpha / rank is {alpha / rank:.3g}; it must be non-zero and at most "
                                    f"{LORA_MAX_SCALE:g} in size (alpha {alpha:.3g}, rank {rank})")
        tensors = {}
        for name, pair in raw.items():
            if not isinstance(name, str) or not _ADAPTED_LAYER.fullmatch(name):
                raise LearnedStateError(f"{where}: tensor {str(name)[:80]!r} is not an adapted linear layer "
                                        "(model.layers.<n>.self_attn.q_proj|k_proj|v_proj|o_proj or "
                                        "model.layers.<n>.mlp.gate_proj|up_proj|down_proj)")
            if not isinstance(pair, dict):
                raise LearnedStateError(f"{where} {name}: must map a and b to tensors, not {type(pair).__name__}")
            a, b = _unpack(pair.get("a"), f"{where} {name}.a"), _unpack(pair.get("b"), f"{where} {name}.b")
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != rank or b.shape[1] != rank:
                raise LearnedStateError(f"{where} {name}: A must be rank x in and B out x rank (rank {rank})")
            tensors[name] = (a, b)
        self.set(tensors, rank, alpha, dict(state.get("base") or {}), instructions, budget,
                 state.get("fit") if isinstance(state.get("fit"), dict) else {})
        if state.get("adapter_id") not in (None, self.adapter_id):
            raise LearnedStateError(f"{where}: its tensors do not match its adapter_id (a damaged file)")
        return self
