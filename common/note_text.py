"""A note pasted as plain text, split into numbered sentences the way a case file holds them: one per line, and a
line of several sentences split at sentence ends (a header such as "HOSPITAL COURSE:" stays its own sentence)."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[(\"'])")


def split_note(text: str) -> list[str]:
    """The sentences of `text`, in order, without empty ones."""
    out = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        out += [s.strip() for s in _SENTENCE_END.split(line.strip()) if s.strip()]
    return out
