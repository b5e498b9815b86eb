"""Small formatting helpers for report.md lines (they are read by people, not parsed)."""

from __future__ import annotations

from typing import Any


def counts(values: dict[str, Any] | None) -> str:
    """{'question': 1, 'answer': 2} as `question 1, answer 2`."""
    return ", ".join(f"{k} {v}" for k, v in (values or {}).items()) or "none"


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|"})


def md(text: object) -> str:
    """`text` as one line of Markdown that renders as itself: whitespace runs (newlines too) become one space, and the
    characters Markdown would read as markup are escaped (a note's `[** name **]` placeholder is not a link in bold,
    `<!--` does not hide the rest of the file)."""
    return " ".join(str(text).split()).translate(_MARKDOWN)
