"""Client-side rate limits for API backends: at most `rpm` requests and `tpm` tokens per rolling minute, shared by
every thread of the run, so parallel cases stay under a provider's quota instead of collecting 429s.
A DSPy callback: `on_lm_start` waits until the request fits. Cache hits are counted like requests (conservative)."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from dspy.utils.callback import BaseCallback


class RateLimiter(BaseCallback):
    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock=time.monotonic, sleep=time.sleep) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._requests: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int]] = collections.deque()
        self.waited = 0.0  # seconds spent waiting (reported in usage.json)

    def _expire(self, now: float) -> None:
        while self._requests and now - self._requests[0] >= 60:
            self._requests.popleft()
        while self._tokens and now - self._tokens[0][0] >= 60:
            self._tokens.popleft()

    def reserve(self, tokens: int) -> float:
        """Book one request of `tokens` now and return 0, or return the seconds to wait before asking again (a
        shared limiter serving several processes answers this without blocking; see runners/executors/program_worker.py)."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            used = sum(t for _, t in self._tokens)
            fits_rpm = self.rpm is None or len(self._requests) < self.rpm
            fits_tpm = self.tpm is None or used + tokens <= self.tpm or not self._tokens
            if fits_rpm and fits_tpm:
                self._requests.append(now)
                self._tokens.append((now, tokens))
                return 0.0
            blocking = ([self._requests[0]] if not fits_rpm else []) + ([self._tokens[0][0]] if not fits_tpm else [])
            return max(0.05, 60 - (now - min(blocking)))

    def acquire(self, tokens: int) -> None:
        while wait := self.reserve(tokens):
            self.waited += wait
            self._sleep(wait)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.acquire(request_tokens(inputs))


def request_tokens(inputs: dict[str, Any]) -> int:
    """A request's tokens before the call: its prompt at 4 characters per token plus the reply it may take."""
    text = str(inputs.get("messages") or inputs.get("prompt") or "")
    return max(1, len(text) // 4) + int(inputs.get("max_tokens") or 0)
