"""Where a run's pending items run: `run.executor=local` (this process, threads for API backends) or
`run.executor=ray` (tasks on a Ray cluster). Either way the driver appends every record to the run's one
`predictions.jsonl` (runners/executors/resumable.py `run_resumable`), so resume, the fingerprint, the lock and every output file
are the same whichever executor ran the items."""

from __future__ import annotations

from omegaconf import DictConfig

from common.errors import ConfigError
from runners.executors.base import EXECUTORS, Executor, Save

__all__ = ["EXECUTORS", "Executor", "Save", "executor_for"]

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
