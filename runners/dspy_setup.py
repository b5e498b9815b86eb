"""DSPy's process-wide settings from a composed config: the LM cache, the adapter (`lm.adapter._target_`) and the
callbacks (`lm.rate_limit`). Called once per process by every task that runs a program (library code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy
from omegaconf import DictConfig

from common.errors import ConfigError


def configure_dspy(cfg: DictConfig, rate_limiter: Any = None) -> None:
    """DSPy's cache, adapter and callbacks from `cfg`. `rate_limiter`: a callback that enforces
    `lm.rate_limit` instead of this process's own (Ray workers share one limiter: runners/executors/limits.py)."""
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
