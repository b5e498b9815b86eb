"""Requests sent to an API LM, counted per thread (retries included), so usage.json can show how many were retries.

`lms.factory` registers a LiteLLM logger that calls `count_attempt()` before every HTTP attempt (LiteLLM retries
429/5xx with backoff inside one call); `UsageLedger` compares attempts with the calls that succeeded."""

from __future__ import annotations

import threading

_local = threading.local()


def count_attempt() -> None:
    _local.n = getattr(_local, "n", 0) + 1


def attempts() -> int:
    return getattr(_local, "n", 0)
