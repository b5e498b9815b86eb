"""Typed reads of a run's records for the reports: a hand-edited field of the wrong type reads as missing, so
`task=report` still writes the page."""

from __future__ import annotations

import math
from typing import Any


def number(value: Any) -> float | None:
    """A finite int or float (not a bool); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def integer(value: Any) -> int | None:
    """An int (or a float holding one), not a bool; None for anything else."""
    found = number(value)
    return int(found) if found is not None and found == int(found) else None


def text(value: Any) -> str | None:
    """A string; a number as its digits; None for anything else (a list, a dict, null)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def texts(value: Any) -> list[str]:
    """The strings (and numbers, as digits) of a list; [] when `value` is not a list."""
    if not isinstance(value, list):
        return []
    return [t for t in (text(v) for v in value) if t is not None]


def entries(value: Any) -> list[dict[str, Any]]:
    """The objects of a list; [] when `value` is not a list."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def mapping(value: Any) -> dict[str, Any]:
    """`value` when it is an object, else {}."""
    return value if isinstance(value, dict) else {}


def seconds(value: Any, digits: int = 2) -> str:
    """`1.23 s`, or `? s` for a value that is not a number."""
    found = number(value)
    return f"{found:.{digits}f} s" if found is not None else "? s"
