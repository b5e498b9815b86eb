"""Nested dicts as one level of dotted keys (config diffs, tracking params and metrics); lists stay leaves."""

from __future__ import annotations

from typing import Any


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}
