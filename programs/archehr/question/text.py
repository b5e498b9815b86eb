"""The learned question stage's text handling, form only: the message in (cut to a token budget), one question out."""

from __future__ import annotations

import re
from collections.abc import Callable

from common.control_tokens import strip_control_tokens
from common.note_text import split_sentences

# Web-form labels some messages carry ("SUBJECT: ... MESSAGE: ..."): labels, not the writer's words.
_FORM_LABEL = re.compile(r"(?im)^\s*(subject|message|question)\s*:\s*")
_SPACE = re.compile(r"\s+")
_MAX_WORD_CHARS = 40   # a longer "word" is cut before any per-token work (a 1 MB run of letters costs nothing)
_LEADING_LABEL = re.compile(r"^\s*(?:question|clinician question|summary|answer)\s*:\s*", re.IGNORECASE)


def normalise_message(text: str, max_chars: int = 20_000) -> str:
    """The message as one line: control tokens and form labels dropped, whitespace collapsed, words cut to 40
    characters, over `max_chars` its first and last halves of that. Linear: it bounds the cost of what follows."""
    words = [w[:_MAX_WORD_CHARS] for w in _SPACE.split(_FORM_LABEL.sub(" ", strip_control_tokens(text))) if w]
    line = " ".join(words)
    if len(line) > max_chars:
        half = max_chars // 2
        line = line[:half].rsplit(" ", 1)[0] + " ... " + line[-half:].split(" ", 1)[-1]
    return line.strip()


def fit_to_budget(message: str, count_tokens: Callable[[str], int], budget: int) -> str:
    """`message` if it has at most `budget` tokens; else the sentences that fit, questions first, then the earliest,
    in the message's order."""
    if count_tokens(message) <= budget:
        return message
    sentences = split_sentences(message) or [message]
    order = sorted(range(len(sentences)), key=lambda i: (not sentences[i].rstrip().endswith("?"), i))
    kept: set[int] = set()
    used = 0
    for i in order:
        n = count_tokens(sentences[i])
        if used + n > budget:
            continue
        kept.add(i)
        used += n
    if not kept:  # one sentence longer than the budget: its first words
        words = sentences[order[0]].split()
        while words and count_tokens(" ".join(words)) > budget:
            words = words[: max(1, int(len(words) * 0.8))] if len(words) > 1 else []
        return " ".join(words)
    return " ".join(sentences[i] for i in sorted(kept))


def _reply_question(text: str) -> str:
    """A reply's question as written: its first line, a leading label removed, up to its '?' when it has one."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = _LEADING_LABEL.sub("", line).strip().strip('"').strip()
    return line[: line.index("?") + 1] if "?" in line else line  # a reply that goes on after its question


def reply_fits(text: str, max_words: int) -> bool:
    """Whether `finish_question` keeps the reply's question whole (one cut at `max_words` ends mid-phrase)."""
    return len(_reply_question(text).split()) <= max_words


def finish_question(text: str, max_words: int) -> str:
    """One question from a model's reply: its first line, a leading label removed, at most `max_words` words, ending
    in '?'. Empty when nothing is left."""
    words = _reply_question(text).split()[:max_words]
    if not words:
        return ""
    out = " ".join(words).rstrip(",;:.-!")
    if not out:
        return ""
    out = out[0].upper() + out[1:]
    return out if out.endswith("?") else out + "?"


def first_question_sentence(message: str) -> str:
    """The message's first sentence ending in '?', else its first sentence (a baseline and the stage's fallback)."""
    sentences = split_sentences(message) or [message]
    return next((s for s in sentences if s.rstrip().endswith("?")), sentences[0])


# Trivial baselines of Subtask 1 (each cut to the word limit by the caller): what a learned stage must beat.
BASELINES: dict[str, Callable[[str], str]] = {"first sentence": lambda m: (split_sentences(m) or [m])[0],
                                              "first question sentence": first_question_sentence,
                                              "first 15 words": lambda m: " ".join(m.split()[:15])}


def opening(question: str, n: int = 4) -> str:
    """The first `n` words, lower case (one opening repeated is a collapsed template)."""
    return " ".join(question.lower().split()[:n])


_FIRST_PERSON = re.compile(r"\b(i|my|me|mine|i'm|i've)\b", re.IGNORECASE)


def first_person(question: str) -> bool:
    """The writer's own voice (I, my, me): a clinician question is about the patient, in the third person."""
    return bool(_FIRST_PERSON.search(question))
