"""Requests sent to an API LM, counted per thread (retries included), so usage.json can show how many were retries.

lm=openai_compatible's engine calls `count_attempt()` at every attempt (DSPy retries with backoff inside one call);
for LiteLLM, `lms.factory` registers a logger that does; `UsageLedger` compares attempts with the calls that
succeeded."""

from __future__ import annotations

import threading

_local = threading.local()


def count_attempt() -> None:
    _local.n = getattr(_local, "n", 0) + 1


def attempts() -> int:
    return getattr(_local, "n", 0)
