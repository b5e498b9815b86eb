"""Shared runner plumbing: DSPy settings from config, the output folder, JSON writing."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import dspy
from omegaconf import DictConfig
from tqdm import tqdm

from tasks.archehr.submission import PredictionLog
from tasks.text_metrics import BertScoreConfig

log = logging.getLogger(__name__)
T = TypeVar("T")


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


def bertscore_config(cfg: DictConfig) -> BertScoreConfig | None:
    bs = cfg.metrics.get("bertscore")
    if not bs:
        return None
    return BertScoreConfig(model_type=bs.model_type, num_layers=bs.num_layers,
                           rescale_with_baseline=bs.rescale_with_baseline, lang=bs.lang)


def run_resumable(items: Sequence[T], key: Callable[[T], str], run_one: Callable[[T], dict[str, Any]],
                  log_file: PredictionLog, *, num_threads: int = 1, progress: bool = True,
                  unit: str = "item") -> dict[str, dict[str, Any]]:
    """Run every item not yet in `log_file`, appending each record as soon as it finishes (a rerun resumes);
    returns the records of all items, in input order. API backends run `num_threads` items in parallel."""
    done = log_file.read()
    todo = [item for item in items if key(item) not in done]
    if len(todo) < len(items):
        log.info("resuming: %d %ss already in %s, %d to run", len(items) - len(todo), unit, log_file.path, len(todo))

    def one(item: T) -> tuple[str, dict[str, Any]]:
        record = run_one(item)
        log_file.append(record)
        return key(item), record

    with tqdm(total=len(todo), desc=f"{unit}s", unit=unit, disable=not progress) as bar:
        if num_threads > 1:
            with ThreadPoolExecutor(num_threads) as pool:
                results = pool.map(one, todo)  # order-preserving
                for k, record in results:
                    done[k] = record
                    bar.update()
        else:
            for k, record in map(one, todo):
                done[k] = record
                bar.update()
    return {key(item): done[key(item)] for item in items if key(item) in done}
