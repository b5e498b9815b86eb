"""Small formatting helpers for report.md lines (they are read by people, not parsed)."""

from __future__ import annotations

from typing import Any


def counts(values: dict[str, Any] | None) -> str:
    """{'question': 1, 'answer': 2} as `question 1, answer 2`."""
    return ", ".join(f"{k} {v}" for k, v in (values or {}).items()) or "none"
