"""Where a run's pending items run (conf/executor/): `executor=local` (this process) or `executor=ray`. Either way the
driver appends every record to the run's one `predictions.jsonl` (resumable.py), so resume, the fingerprint, the
lock and every output are the same whichever executor ran the items."""

from __future__ import annotations

from hydra.utils import get_class
from omegaconf import DictConfig

from common.errors import ConfigError, import_failure
from common.settings import executor_settings, executor_target
from runners.executors.base import Executor, Save

__all__ = ["Executor", "Save", "executor_for"]


def executor_for(cfg: DictConfig, unit: str = "item") -> Executor:
    """The executor the `executor` group chose, built from its `_target_` with its checked settings, the run's config
    (a Ray worker builds its program from it) and `unit` (how its messages name an item: "case", "note")."""
    target = executor_target(cfg)
    params = executor_settings(cfg)   # a value that cannot work is one error line, before any class is imported
    try:
        cls = get_class(target)
    except Exception as exc:  # noqa: BLE001 - hydra says why (no such module / attribute)
        raise ConfigError(f"executor._target_={target}: not a class clinprog can import ({import_failure(exc)})") from None
    try:
        return cls(cfg=cfg, unit=unit, **params)
    except TypeError as exc:
        raise ConfigError(f"executor._target_={target}: {exc}") from None
