"""Sentence splitting, one rule for everything: an answer or a narrative (`split_sentences`), and a note pasted as
plain text, split into numbered sentences the way a case file holds them (`split_note`: each line split at sentence
ends; a list number such as "1." or an abbreviation such as "Dr." stays with the words after it, and each item of a
list written on one line is a sentence of its own)."""

from __future__ import annotations

import re

# Bidi controls (embeddings, overrides, isolates, marks): invisible, so a "." they follow still ends a sentence
BIDI = "\u200e\u200f\u202a-\u202e\u2066-\u2069"
# a sentence ends at . ! or ? (bidi controls after it stay with it) followed by space and a capital, a digit, a
# quote or an opening bracket
_SPLIT = re.compile(rf"(?<=[.!?])([{BIDI}]*)\s+(?=[{BIDI}]*[A-Z0-9\"'(\[])")
# a list number ("1.", "#2.", "a.") ends no sentence: "1. Aspirin 81 mg PO DAILY" is one line of a medication list
_LIST_NUMBER = re.compile(r"#?(?:\d{1,3}|[A-Za-z])\.")
# nor does a title or a Latin abbreviation inside a note line ("outlet procedures (e.g. TURP)", "seen by Dr. Lee")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|vs|Dr|Drs|Mr|Mrs|Ms|Prof|St)\.)$", re.IGNORECASE)
SPLITS = ("sentences", "lines")


# a number that may open an item of a list written on one line ("Medications: 1. Apixaban 5 mg 2. Atorvastatin")
_INLINE_ITEM = re.compile(r"(?:^|(?<=\s))(\d{1,2})\.(?=\s+[A-Za-z(\[])")


def _inline_items(text: str) -> set[int]:
    """Where the items of a list written on one line start: numbers 1, 2, 3, ... in that order, at least two."""
    starts, expected = set(), 1
    for m in _INLINE_ITEM.finditer(text):
        if int(m.group(1)) == expected:
            starts.add(m.start())
            expected += 1
    return starts if len(starts) > 1 else set()


def _split(text: str, list_numbers: bool) -> list[str]:
    text = text.strip()
    items = _inline_items(text) if list_numbers else set()
    out, start = [], 0
    for end in _SPLIT.finditer(text):
        piece = text[start:end.end(1)].strip()
        if list_numbers and (_LIST_NUMBER.fullmatch(piece) or _ABBREVIATION.search(piece)):
            continue  # the number (the abbreviation) joins the words after it
        item = next((i for i in items if start < i and text[i:end.end(1)].strip().rstrip(".").isdigit()), None)
        if item is not None:  # an inline list's number: the item it opens starts a sentence, with its number
            out.append(text[start:item].strip())
            start = item
            continue
        out.append(piece)
        start = end.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def split_sentences(text: str) -> list[str]:
    """The sentences of one run of text (an answer, a narrative, a note line), without empty ones."""
    return _split(text, list_numbers=False)


def ends_sentence(text: str) -> bool:
    """Whether `text` ends with . ! or ?, bidi controls after it not counted (they would make "x.\u202c" + ".")."""
    return re.sub(f"[{BIDI}\\s]+$", "", text).endswith((".", "!", "?"))


def split_note(text: str, split: str = "sentences") -> list[str]:
    """The sentences of `text`, in order, without empty ones: each line split at sentence ends (`split="lines"`:
    each line one sentence, as given)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if split == "lines":
        return [line.strip() for line in lines if line.strip()]
    return [s for line in lines for s in _split(line, list_numbers=True)]


def cut_long(sentence: str, max_chars: int) -> list[str]:
    """`sentence` in pieces of at most `max_chars` characters, cut at the last space before the limit (anywhere when
    a piece has none): a table pasted without full stops would otherwise be one unit the embedder truncates."""
    pieces: list[str] = []
    rest = sentence.strip()
    while len(rest) > max_chars:
        cut = rest.rfind(" ", 1, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [*pieces, rest] if rest else pieces


def numbered_note(text: str, max_chars: int, split: str = "sentences") -> tuple[list[str], list[range]]:
    """`split_note(text, split)` with every sentence over `max_chars` cut (`cut_long`); also, per cut sentence, the
    indices of its pieces in the returned list."""
    out: list[str] = []
    cut: list[range] = []
    for sentence in split_note(text, split):
        pieces = cut_long(sentence, max_chars) if len(sentence) > max_chars else [sentence]
        if len(pieces) > 1:
            cut.append(range(len(out), len(out) + len(pieces)))
        out += pieces
    return out, cut
