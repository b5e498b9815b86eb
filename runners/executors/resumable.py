"""The resumable item loop every program run shares: each item's record is appended as soon as it finishes and a
rerun resumes; where the items run is the executor's choice."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tqdm import tqdm

from common.logs import printable
from common.prediction_log import PredictionLog
from runners.executors import Executor

log = logging.getLogger(__name__)
T = TypeVar("T")


class Interrupted(Exception):
    """Ctrl-C during a run: the records finished so far are saved."""

    def __init__(self, saved: int) -> None:
        super().__init__(saved)
        self.saved = saved


def run_resumable(items: Sequence[T], key: Callable[[T], str], run_one: Callable[[T], dict[str, Any]],
                  log_file: PredictionLog, executor: Executor, *, num_threads: int, progress: bool,
                  unit: str) -> dict[str, dict[str, Any]]:
    """Run every item not yet in `log_file` on `executor`, appending each record here as soon as it finishes (a rerun
    resumes); returns the records of all items, in input order. Ctrl-C raises `Interrupted` once the items in flight
    are abandoned; what was appended stays."""
    done = log_file.read()
    todo = [item for item in items if key(item) not in done]
    if len(todo) < len(items):
        log.info("resuming: %d %ss already in %s, %d to run", len(items) - len(todo), unit, log_file.path, len(todo))
    others = set(done) - {key(item) for item in items}
    if others:  # e.g. a rerun with a smaller data.limit: kept in the file, left out of this run's outputs
        log.warning("%d %ss in %s are not among this run's inputs (%s): kept there, not in this run's submission, "
                    "scores or reports", len(others), unit, log_file.path, ", ".join(printable(i) for i in sorted(others)[:5]))

    bar = tqdm(total=len(todo), desc=f"{unit}s", unit=unit, disable=not progress)
    saving = threading.Lock()

    def save(item: T, record: dict[str, Any]) -> None:  # local threads call this concurrently
        log_file.append(record)
        with saving:
            done[key(item)] = record
            bar.update()

    try:
        executor.run(todo, run_one, save, num_threads)
    except KeyboardInterrupt:
        raise Interrupted(len(log_file.read())) from None
    finally:
        bar.close()
    return {key(item): done[key(item)] for item in items if key(item) in done}
