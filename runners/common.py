"""Shared runner plumbing: DSPy settings from config, the output folder, JSON writing, the resumable item loop."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import dspy
from omegaconf import DictConfig
from tqdm import tqdm

from common.errors import ConfigError
from common.prediction_log import PredictionLog
from runners.executors import Executor

log = logging.getLogger(__name__)
T = TypeVar("T")


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


def output_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside @hydra.main (tests, notebooks)
        path = Path("outputs/adhoc")
        path.mkdir(parents=True, exist_ok=True)
        return path


def append_main_log(out: Path, line: str) -> None:
    """A line for the run's own record (Hydra's main.log): why it stopped, next to its log lines."""
    with open(out / "main.log", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def record_failure(line: str) -> None:
    """The error line goes to the run's main.log too; a run folder holding nothing of the run's own is removed (a
    folder another run holds has its run.lock, and one with predictions has them: both are kept)."""
    try:
        out = output_dir()
    except Exception:  # noqa: BLE001 - no run folder to speak of
        return
    # Hydra's files and what a run writes before its first prediction: nothing to resume or look at.
    no_content = {".hydra", "main.log", "fingerprint.json"}
    if out.is_dir() and all(p.name in no_content or (p.name == "predictions.jsonl" and p.stat().st_size == 0)
                            for p in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)  # nothing of the run's own: no clutter of near-empty folders
        for parent in (out.parent, out.parent.parent):  # outputs/<task>/ and outputs/, when this was their only run
            with contextlib.suppress(OSError):
                parent.rmdir()  # only ever removes an empty folder
        return
    append_main_log(out, line)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    """Write-then-rename: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(data), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class Interrupted(Exception):
    """Ctrl-C during a run: the records finished so far are saved."""

    def __init__(self, saved: int) -> None:
        super().__init__(saved)
        self.saved = saved


def run_resumable(items: Sequence[T], key: Callable[[T], str], run_one: Callable[[T], dict[str, Any]],
                  log_file: PredictionLog, *, num_threads: int = 1, progress: bool = True,
                  unit: str = "item", executor: Executor | None = None) -> dict[str, dict[str, Any]]:
    """Run every item not yet in `log_file`, appending each record as soon as it finishes (a rerun resumes);
    returns the records of all items, in input order. API backends run `num_threads` items in parallel.
    `executor` says where the items run (runners/executors: local threads by default, or Ray workers that build
    their own `run_one`); the records always come back here and are appended to this one file.
    Ctrl-C raises `Interrupted` once the items in flight are abandoned; what was appended stays."""
    from runners.executors.local import LocalExecutor

    done = log_file.read()
    todo = [item for item in items if key(item) not in done]
    if len(todo) < len(items):
        log.info("resuming: %d %ss already in %s, %d to run", len(items) - len(todo), unit, log_file.path, len(todo))
    others = set(done) - {key(item) for item in items}
    if others:  # e.g. a rerun with a smaller data.limit: kept in the file, left out of this run's outputs
        log.warning("%d %ss in %s are not among this run's inputs (%s): kept there, not in this run's submission, "
                    "scores or reports", len(others), unit, log_file.path, ", ".join(sorted(others)[:5]))

    bar = tqdm(total=len(todo), desc=f"{unit}s", unit=unit, disable=not progress)
    saving = threading.Lock()

    def save(item: T, record: dict[str, Any]) -> None:  # local threads call this concurrently
        log_file.append(record)
        with saving:
            done[key(item)] = record
            bar.update()

    try:
        (executor or LocalExecutor()).run(todo, run_one, save, num_threads)
    except KeyboardInterrupt:
        raise Interrupted(len(log_file.read())) from None
    finally:
        bar.close()
    return {key(item): done[key(item)] for item in items if key(item) in done}
