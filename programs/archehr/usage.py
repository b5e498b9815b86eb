"""Per-stage accounting: seconds, real LM calls and tokens (cache hits report no usage and are not calls)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from dspy.utils.usage_tracker import track_usage


@dataclass
class StageUsage:
    seconds: float = 0.0
    lm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, other: StageUsage) -> None:
        self.seconds += other.seconds
        self.lm_calls += other.lm_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


@dataclass
class UsageLedger:
    stages: dict[str, StageUsage] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        usage = self.stages.setdefault(name, StageUsage())
        start = time.perf_counter()
        with track_usage() as tracker:
            try:
                yield
            finally:
                usage.seconds += time.perf_counter() - start
                for entries in tracker.usage_data.values():
                    usage.lm_calls += len(entries)
                    usage.input_tokens += sum(int(e.get("prompt_tokens") or 0) for e in entries)
                    usage.output_tokens += sum(int(e.get("completion_tokens") or 0) for e in entries)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {k: vars(v).copy() for k, v in self.stages.items()}
