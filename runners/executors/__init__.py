"""Where a run's pending items run (conf/executor/): `executor=local` (this process) or `executor=ray`. Either way the
driver appends every record to the run's one `predictions.jsonl` (resumable.py), so resume, the fingerprint, the
lock and every output are the same whichever executor ran the items."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hydra.utils import get_class
from omegaconf import DictConfig

from common.errors import ConfigError, import_failure
from common.settings import executor_settings, executor_target

Save = Callable[[Any, dict[str, Any]], None]


class Executor(Protocol):
    """Built by `executor_for` as `cls(cfg=<the run's config>, unit=<"case", "note", ...>, **<executor.* settings>)`."""

    # True where the workers build the program from the config themselves (Ray): the driver then builds none and
    # passes a `run_one` that is never called
    builds_own_program: bool

    def run(self, todo: Sequence[Any], run_one: Callable[[Any], dict[str, Any]], save: Save, num_threads: int) -> None:
        """Run every item of `todo`, calling `save(item, record)` in this process as each one finishes (any order).
        Ctrl-C stops the work and re-raises KeyboardInterrupt; an item's own error propagates unchanged."""


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
