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


def cut_long(sentence: str, max_chars: int) -> list[str]:
    """`sentence` in pieces of at most `max_chars` characters, cut at the last space before the limit (anywhere when
    a piece has none): a 5,000-character "sentence" (a table pasted without full stops) would otherwise be one unit
    the embedder truncates and an answer cannot quote."""
    pieces: list[str] = []
    rest = sentence.strip()
    while len(rest) > max_chars:
        cut = rest.rfind(" ", 1, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [*pieces, rest] if rest else pieces


def numbered_note(text: str, max_chars: int) -> tuple[list[str], list[range]]:
    """`split_note(text)` with every sentence over `max_chars` cut by length (`cut_long`); also, per cut sentence, the
    0-based indices of its pieces in the returned list, so the run can say which sentences were cut."""
    out: list[str] = []
    cut: list[range] = []
    for sentence in split_note(text):
        pieces = cut_long(sentence, max_chars) if len(sentence) > max_chars else [sentence]
        if len(pieces) > 1:
            cut.append(range(len(out), len(out) + len(pieces)))
        out += pieces
    return out, cut
