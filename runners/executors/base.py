"""What an executor is: it runs a run's pending items and hands each record back to the driver (`Save`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Save = Callable[[Any, dict[str, Any]], None]


class Executor(Protocol):
    """Built by `executor_for` as `cls(cfg=<the run's config>, unit=<"case", "note", ...>, **<executor.* settings>)`."""

    # True where the executor's workers build the program from the config themselves (Ray): the driver then builds
    # none and passes a `run_one` that is never called (an executor without this attribute runs the driver's)
    builds_own_program: bool

    def run(self, todo: Sequence[Any], run_one: Callable[[Any], dict[str, Any]], save: Save, num_threads: int) -> None:
        """Run every item of `todo`, calling `save(item, record)` in this process as each one finishes (any order).
        Ctrl-C stops the work and re-raises KeyboardInterrupt; an item's own error propagates unchanged."""
