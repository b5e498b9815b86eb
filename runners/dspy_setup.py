"""DSPy's process-wide settings from a composed config (the LM cache, the adapter, `lm.rate_limit`'s callback), and
the one predictor factory: the driver's local run and every Ray worker build their program here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.exceptions import LMError
from omegaconf import DictConfig

from common.contract import ProgramContract
from common.errors import ConfigError
from lms import build_role_lms
from lms.errors import lm_failure


def configure_dspy(cfg: DictConfig, rate_limiter: Any = None) -> None:
    """DSPy's cache, adapter and callbacks from `cfg`. `rate_limiter`: a callback that enforces `lm.rate_limit`
    instead of this process's own (Ray workers share one limiter)."""
    dspy.configure_cache(disk_cache_dir=str(Path(cfg.cache_dir).expanduser()), enable_memory_cache=True)
    from hydra.utils import instantiate

    from signatures.constrained import ConstrainedJSONAdapter

    node = cfg.lm.get("adapter")
    if node is not None and not (hasattr(node, "get") and node.get("_target_")):
        raise ConfigError(f"lm.adapter must be a _target_ config (lm.adapter._target_=dspy.ChatAdapter), not {node!r}")
    adapter = instantiate(node) if node is not None else ConstrainedJSONAdapter()
    callbacks = []
    limits = cfg.lm.get("rate_limit") or {}
    if rate_limiter is not None:
        callbacks.append(rate_limiter)
    elif limits.get("rpm") or limits.get("tpm"):
        from lms.rate_limit import RateLimiter

        callbacks.append(RateLimiter(rpm=limits.get("rpm"), tpm=limits.get("tpm")))
    dspy.configure(adapter=adapter, track_usage=False, callbacks=callbacks)


def build_predictor(cfg: DictConfig, contract: ProgramContract, roles: list[str],
                    rate_limiter: Any = None) -> Callable[[Any], dict[str, Any]]:
    """DSPy's settings, the role LMs (a missing key or a dead server fails here) and the program, built once;
    returns `predict(item) -> record`, where an LM failure is one line naming backend and host."""
    configure_dspy(cfg, rate_limiter=rate_limiter)
    program = contract.build(cfg, build_role_lms(cfg.lm, roles) if roles else {})

    def predict(item: Any) -> dict[str, Any]:
        try:
            return contract.predict(program, item)
        except LMError as exc:  # unreachable API, timeout, provider error
            raise lm_failure(cfg.lm, exc) from None

    return predict


def built_by_workers(item: Any) -> dict[str, Any]:
    """The driver's `run_one` under an executor whose workers build their own program: never called."""
    raise RuntimeError("this executor's workers run the items; the driver has no program")
