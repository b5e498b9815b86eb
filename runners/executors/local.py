"""`executor=local`: the items run in this process, `num_threads` at a time (API backends wait on the network)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from runners.executors import Save


class LocalExecutor:
    builds_own_program = False  # the driver's predictor runs the items

    def __init__(self, cfg: Any = None, unit: str = "item") -> None:
        pass

    def run(self, todo: Sequence[Any], run_one: Callable[[Any], dict[str, Any]], save: Save, num_threads: int) -> None:
        def one(item: Any) -> None:
            save(item, run_one(item))  # in the worker thread: a record is on disk as soon as its item finishes

        if num_threads <= 1:
            for item in todo:
                one(item)
            return
        pool = ThreadPoolExecutor(num_threads)
        try:
            pending = {pool.submit(one, item) for item in todo}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    future.result()  # an item's error stops the run here
        finally:
            # Ctrl-C or an error: queued items are dropped, the ones running are abandoned (their threads end alone)
            pool.shutdown(wait=False, cancel_futures=True)
