"""Patient messages as written (no capitals, dropped apostrophes, 'failure.I', '......', ';' between clauses) made
into clean sentences, so the question stage reads sentences rather than whatever the punctuation happens to be."""

from __future__ import annotations

import re

_APOSTROPHE = [
    (re.compile(r"[\u2018\u2019\u02bc`]"), "'"),
    (re.compile(r"[\u201c\u201d]"), '"'),
    # "don t", "doesn t", "it s", "I m", "I ve": apostrophes lost in the message
    (re.compile(r"\b(do|does|did|is|was|are|were|ca|can|won|wo|could|should|would|have|has|had|must|need)n t\b",
                re.I), r"\1n't"),
    (re.compile(r"\b(don|doesn|didn|isn|wasn|aren|weren|couldn|shouldn|wouldn|haven|hasn|hadn|won|can)\s+t\b",
                re.I), r"\1't"),
    (re.compile(r"\b(it|that|he|she|what|there|who|here|where|mom|dad)\s+s\b(?=\s)", re.I), r"\1's"),
    (re.compile(r"\bI\s+(m|ve|ll|d)\b", re.I), r"I'\1"),
    (re.compile(r"\bIm\b"), "I'm"),
    (re.compile(r"\bIve\b"), "I've"),
    (re.compile(r"\bi\b"), "I"),
]
_ABBREVIATIONS = {"dr", "mr", "mrs", "ms", "vs", "e.g", "i.e", "etc", "approx", "inj", "no", "st", "jr", "sr", "trt",
                  "hosp", "yrs", "yr", "mg", "lbs", "kgs", "ft", "min", "mins", "hrs"}
_GLUED = re.compile(r"(?<=[a-z)?!])([.?!,;:]?)(?<=[.?!,;:])(?=[A-Za-z])")       # "failure.I", "Hello,My", "hospital.this"
_ELLIPSIS = re.compile(r"\s*\.{2,}\s*|\s*\u2026\s*")
_SPACED_MARK = re.compile(r"\s+([.?!,;:])")
_BREAK = re.compile(r"([.?!]+|;)(\s+)")


def normalize(text: str) -> str:
    """One line of text with apostrophes restored, a space after glued punctuation, '...' as a sentence end."""
    text = " ".join(text.split())
    text = re.sub(r"\s*([?!])(?:\s*[.,])+", r"\1 ", text)
    for pattern, repl in _APOSTROPHE:
        text = pattern.sub(repl, text)
    text = _GLUED.sub(r"\1 ", text)
    text = _ELLIPSIS.sub(". ", text)
    text = _SPACED_MARK.sub(r"\1", text)
    return re.sub(r"([?!])[.,]+", r"\1", text).strip()


def split_message(text: str) -> list[str]:
    """Sentences of a patient message: a break after '.', '?', '!' or ';' whatever case follows (patients often
    write in lower case), except after an abbreviation such as 'Dr.'; each sentence keeps its end mark."""
    text = normalize(text)
    sentences: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        head = text[start:m.start()]
        last_word = head.rsplit(" ", 1)[-1].lower().rstrip(".")
        if m.group(1) == "." and (last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word)):
            continue
        sentence = text[start:m.start() + len(m.group(1))].strip()
        if sentence.endswith(";"):
            sentence = sentence[:-1] + "."
        if re.search(r"\w", sentence):
            sentences.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if re.search(r"\w", tail):
        sentences.append(tail)
    return sentences


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def as_question(text: str) -> str:
    """Capitalised, single-spaced, closed with exactly one '?' (a trailing '.', ',' or '!' replaced)."""
    text = " ".join(text.split()).strip(" ,;:-")
    text = re.sub(r"[.?!,;:\s]+$", "", text)
    text = re.sub(r"\s+([,?])", r"\1", text)
    return capitalize(text) + "?"
