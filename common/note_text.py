"""Sentence splitting, one rule for everything: an answer or a narrative (`split_sentences`), and a note pasted as
plain text, split into numbered sentences the way a case file holds them (`split_note`: one per line, and a line of
several sentences split at sentence ends; a header such as "HOSPITAL COURSE:" stays its own sentence)."""

from __future__ import annotations

import re

# a sentence ends at . ! or ? followed by space and a capital, a digit, a quote or an opening bracket
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def split_sentences(text: str) -> list[str]:
    """The sentences of one run of text (an answer, a narrative, a note line), without empty ones."""
    return [s.strip() for s in _SPLIT.split(text.strip()) if s.strip()]


def split_note(text: str) -> list[str]:
    """The sentences of `text`, in order, without empty ones: each line split at sentence ends."""
    return [s for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") for s in split_sentences(line)]
