"""Which exceptions a stage turns into its documented fallback, and which must stop the run."""

from __future__ import annotations

from dspy.utils.exceptions import AdapterParseError, ContextWindowExceededError


class StageOutputError(ValueError):
    """The LM answered, but its output breaks the stage's contract (wrong length, out-of-range score)."""


# LM output that does not parse, or a prompt too long for the model: the stage falls back and records why.
# Auth errors, unreachable servers and exhausted rate-limit retries are not caught: the run stops with them.
RECOVERABLE = (AdapterParseError, ContextWindowExceededError, StageOutputError)


def failure_reason(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"[:300]
