"""Per-stage accounting: seconds, real LM calls and tokens (cache hits report no usage and are not calls).

A stage can also run under its own LM (an LM per role, STORM-style): `ledger.stage(name, lm)`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import dspy
from dspy.utils.usage_tracker import track_usage

from common.attempts import attempts


@dataclass
class StageUsage:
    seconds: float = 0.0
    lm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0        # API requests beyond the calls that succeeded (429/5xx retried with backoff)


@dataclass
class UsageLedger:
    stages: dict[str, StageUsage] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str, lm: dspy.LM | None = None) -> Iterator[None]:
        """Time and count the LM usage of one stage; with `lm`, the stage runs under that LM."""
        usage = self.stages.setdefault(name, StageUsage())
        start = time.perf_counter()
        sent_before = attempts()
        with track_usage() as tracker, (dspy.context(lm=lm) if lm is not None else dspy.context()):
            try:
                yield
            finally:
                usage.seconds += time.perf_counter() - start
                calls = sum(len(entries) for entries in tracker.usage_data.values())
                usage.retries += max(0, attempts() - sent_before - calls)
                for entries in tracker.usage_data.values():
                    usage.lm_calls += len(entries)
                    usage.input_tokens += sum(int(e.get("prompt_tokens") or 0) for e in entries)
                    usage.output_tokens += sum(int(e.get("completion_tokens") or 0) for e in entries)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {k: vars(v).copy() for k, v in self.stages.items()}
