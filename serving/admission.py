"""The admission gate of `task=serve`: at most `serve.max_concurrency` requests run at once, up to
`serve.max_queue` more wait, the rest are turned away (429)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Job:
    """One admitted request's work: waiting -> running -> ended, or cancelled while still waiting."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.state = "waiting"
        self.timed_out = False
        self.future: Future | None = None


class Gate:
    """`capacity` workers run requests, `queue` more wait, the rest are turned away. A request counts (`admitted`)
    until its work ends, even after its client left: timed-out work keeps its worker, never adding work beyond
    capacity."""

    def __init__(self, capacity: int, queue: int) -> None:
        self.capacity, self.queue = capacity, queue
        self.admitted = 0
        self.running = 0
        self.timed_out_running = 0
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix="clinprog-serve")

    def submit(self, fn: Callable[[], Any]) -> Job | None:
        with self._lock:
            if self.admitted >= self.capacity + self.queue:
                return None
            self.admitted += 1
        job = Job(fn)
        job.future = self.pool.submit(self._work, job)
        job.future.add_done_callback(lambda _: self._ended())  # also when cancelled while waiting
        return job

    def _work(self, job: Job) -> Any:
        with self._lock:
            job.state = "running"
            self.running += 1
        try:
            return job.fn()
        finally:
            with self._lock:
                job.state = "ended"
                self.running -= 1
                if job.timed_out:
                    self.timed_out_running -= 1

    def _ended(self) -> None:
        with self._lock:
            self.admitted -= 1

    def abandon(self, job: Job) -> None:
        """The client no longer waits (timeout, disconnect): waiting work is cancelled, running work is counted."""
        assert job.future is not None
        if job.future.cancel():
            return
        with self._lock:
            if job.state == "running" and not job.timed_out:
                job.timed_out = True
                self.timed_out_running += 1

    def health(self) -> dict[str, int]:
        with self._lock:
            return {"in_flight": self.admitted, "running": self.running, "waiting": self.admitted - self.running,
                    "timed_out_running": self.timed_out_running, "max_concurrency": self.capacity,
                    "max_queue": self.queue}
