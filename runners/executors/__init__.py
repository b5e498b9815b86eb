"""Where a run's pending items run: `run.executor=local` (this process, threads for API backends) or
`run.executor=ray` (tasks on a Ray cluster). Either way the driver appends every record to the run's one
`predictions.jsonl` (runners/resumable.py `run_resumable`), so resume, the fingerprint, the lock and every output file
are the same whichever executor ran the items."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from omegaconf import DictConfig

from common.errors import ConfigError

T = TypeVar("T")
Save = Callable[[Any, dict[str, Any]], None]
EXECUTORS = ("local", "ray")


class Executor(Protocol):
    def run(self, todo: Sequence[Any], run_one: Callable[[Any], dict[str, Any]], save: Save, num_threads: int) -> None:
        """Run every item of `todo`, calling `save(item, record)` in this process as each one finishes (any order).
        Ctrl-C stops the work and re-raises KeyboardInterrupt; an item's own error propagates unchanged."""


def executor_for(cfg: DictConfig, unit: str = "item") -> Executor | None:
    """The executor `run.executor` names (None: the local one, run_resumable's default); `unit` names an item in
    its messages ("case", "note")."""
    run = cfg.get("run") or {}
    name = str(run.get("executor") or "local")
    if name not in EXECUTORS:
        raise ConfigError(f"run.executor={name!r}: choose one of {list(EXECUTORS)}")
    if name == "local":
        return None
    from runners.executors.ray_executor import RayExecutor

    return RayExecutor(cfg, unit)
