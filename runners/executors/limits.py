"""`lm.rate_limit.rpm/tpm` for a whole Ray run: ONE limiter (a Ray actor) books every request of every worker, so
the quota holds for the run, not per worker.

The actor never blocks: `reserve` books a request and answers 0, or answers how long to wait; the worker's callback
sleeps that long and asks again. One clock (the actor's) decides, so workers on different machines agree."""

from __future__ import annotations

import time
from typing import Any

from dspy.utils.callback import BaseCallback

from lms.rate_limit import RateLimiter, request_tokens


class SharedLimiter:
    """The actor's body (wrapped with ray.remote by the driver): the run's one RateLimiter."""

    def __init__(self, rpm: int | None, tpm: int | None) -> None:
        self._limiter = RateLimiter(rpm=rpm, tpm=tpm)
        self.waits = 0  # answers that told a worker to wait (for tests and the run's log)

    def reserve(self, tokens: int) -> float:
        wait = self._limiter.reserve(tokens)
        self.waits += bool(wait)
        return wait

    def stats(self) -> dict[str, Any]:
        return {"waits": self.waits}


class RemoteRateLimiter(BaseCallback):
    """A worker's DSPy callback: every LM request first books its place with the shared limiter."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.waited = 0.0

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        import ray

        tokens = request_tokens(inputs)
        while wait := ray.get(self.actor.reserve.remote(tokens)):
            self.waited += wait
            time.sleep(wait)
