"""Per-stage accounting: seconds, real LM calls and tokens (cache hits are not calls), retries (attempts counted per
thread by `count_attempt`, less the calls that succeeded) and repairs (outputs whose leaked markup was stripped)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.utils.usage_tracker import track_usage

_local = threading.local()


def count_attempt() -> None:
    _local.n = getattr(_local, "n", 0) + 1


def attempts() -> int:
    return getattr(_local, "n", 0)


@dataclass
class StageUsage:
    seconds: float = 0.0
    lm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0        # API requests beyond the calls that succeeded (429/5xx retried with backoff)
    repairs: int = 0        # string outputs whose leaked markup was stripped (common.markup)


@dataclass
class UsageLedger:
    stages: dict[str, StageUsage] = field(default_factory=dict)
    empty: dict[str, str] = field(default_factory=dict)   # stage -> why its reply, though it parsed, said nothing

    def degenerate(self, name: str, why: str) -> None:
        """Stage `name` answered with output that parses but says nothing (e.g. every score equal)."""
        self.empty[name] = why

    def degenerates(self) -> dict[str, str]:
        """Per stage, why its output was degenerate in this item; stages whose output was not are left out."""
        return dict(self.empty)

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

    def repaired(self, name: str, count: int) -> None:
        """Count `count` outputs of stage `name` that needed markup stripped (a stage module reports them)."""
        self.stages.setdefault(name, StageUsage()).repairs += int(count or 0)

    def repairs(self) -> dict[str, int]:
        """Per stage, the repairs of this item; stages without any are left out (like `fallbacks`)."""
        return {k: v.repairs for k, v in self.stages.items() if v.repairs}

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {k: vars(v).copy() for k, v in self.stages.items()}


def repairs_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """usage.json's `repairs`: outputs whose markup was stripped, per stage (role) and in total, over all records."""
    stages: dict[str, int] = {}
    for record in records:
        for stage, n in (record.get("repairs") or {}).items():
            stages[stage] = stages.get(stage, 0) + int(n)
    return {"total": sum(stages.values()), "stages": stages}
