"""Shared runner plumbing: DSPy settings from config, the output folder, JSON writing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import dspy
from omegaconf import DictConfig


def configure_dspy(cfg: DictConfig) -> None:
    dspy.configure_cache(disk_cache_dir=str(Path(cfg.cache_dir).expanduser()), enable_memory_cache=True)
    from signatures.constrained import ConstrainedJSONAdapter

    adapters = {"json": ConstrainedJSONAdapter, "chat": dspy.ChatAdapter}
    name = cfg.lm.get("adapter", "json")
    if name not in adapters:
        raise ValueError(f"lm.adapter must be one of {sorted(adapters)}, not {name!r}")
    adapter = adapters[name]()
    dspy.configure(adapter=adapter, track_usage=False)


def output_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside @hydra.main (tests, notebooks)
        path = Path("outputs/adhoc")
        path.mkdir(parents=True, exist_ok=True)
        return path


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(_clean(data), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
