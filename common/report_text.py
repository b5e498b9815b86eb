"""Small formatting helpers for report.md lines (they are read by people, not parsed)."""

from __future__ import annotations

from typing import Any


def counts(values: dict[str, Any] | None) -> str:
    """{'question': 1, 'answer': 2} as `question 1, answer 2`."""
    return ", ".join(f"{k} {v}" for k, v in (values or {}).items()) or "none"


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|"})


def md(text: object) -> str:
    """`text` as one line of Markdown that renders as itself: whitespace runs become one space, markup characters
    are escaped and bidi controls isolated."""
    return isolated(" ".join(str(text).split()).translate(_MARKDOWN))


_OPENERS = {"\u202a": "\u202c", "\u202b": "\u202c", "\u202d": "\u202c", "\u202e": "\u202c",
            "\u2066": "\u2069", "\u2067": "\u2069", "\u2068": "\u2069"}


def isolated(text: str) -> str:
    """`text` that holds bidi controls, balanced and wrapped in an isolate (U+2068 ... U+2069), the plain-text
    `<bdi>`, so a U+202E cannot reverse the rest of the line. A closer without its opener is dropped, openers left
    open are closed."""
    if not any(c in _OPENERS or c in "\u202c\u2069\u200e\u200f" for c in text):
        return text
    out, open_ = [], []
    for c in text:
        if c in _OPENERS:
            open_.append(c)
        elif c in "\u202c\u2069":
            # PDI closes its isolate and whatever opened inside it; PDF only an embedding opened after the last isolate
            if c == "\u2069" and any(_OPENERS[o] == c for o in open_):
                while _OPENERS[open_.pop()] != c:
                    pass
            elif c == "\u202c" and open_ and _OPENERS[open_[-1]] == c:
                open_.pop()
            else:
                continue
        out.append(c)
    return "\u2068" + "".join(out) + "".join(_OPENERS[o] for o in reversed(open_)) + "\u2069"
