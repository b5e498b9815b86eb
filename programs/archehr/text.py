"""Deterministic text rules shared by the stages: word limits, the soft cut, prompt lines."""

from __future__ import annotations

from collections.abc import Iterable

from common.errors import number_in
from common.note_text import split_sentences

_SENTENCE_END = (".", "!", "?")


def truncate_words(text: str, max_words: int) -> str:
    return " ".join(text.split()[:max_words])


def _last_sentence_end(words: list[str]) -> int:
    """The index of the last word that ends a sentence (closing quotes aside); -1 when none does."""
    return max((i for i, w in enumerate(words) if w.rstrip("\"')]").endswith(_SENTENCE_END)), default=-1)


def whole_sentences(text: str, max_words: int) -> str:
    """`text` within `max_words` words, ending at the last sentence end within the limit when there is one (a reply
    of two questions keeps the first whole, not half the second), else cut at the limit."""
    words = text.split()
    if len(words) <= max_words:
        return " ".join(words)
    last_end = _last_sentence_end(words[:max_words])
    return " ".join(words[: last_end + 1] if last_end >= 0 else words[:max_words])


def soft_cut(text: str, max_words: int = 75, min_ratio: float = 0.6) -> str:
    """`text` within `max_words` words: cut at the last sentence end within the limit when that keeps at least
    `min_ratio` of it, else hard-cut at the limit and end with a period."""
    words = text.split()
    if len(words) <= max_words:
        return " ".join(words)
    window = words[:max_words]
    last_end = _last_sentence_end(window)
    if last_end + 1 >= min_ratio * max_words:
        return " ".join(window[: last_end + 1])
    cut = " ".join(window).rstrip(",;:-")
    return cut if cut.endswith(_SENTENCE_END) else cut + "."


def numbered(items: Iterable[tuple[str, str]]) -> str:
    """Format (id, text) pairs as `[id] text` lines, the layout every stage prompt uses."""
    return "\n".join(f"[{i}] {t}" for i, t in items)


def last_question_sentence(narrative: str) -> str:
    """The last sentence ending in '?', or the last sentence: the rule-based reading of a patient's question."""
    sentences = split_sentences(narrative) or [narrative]
    questions = [s for s in sentences if s.rstrip().endswith("?")]
    return (questions or sentences)[-1]


def check_answer_limits(max_words: object, soft_cut_ratio: object) -> None:
    """max_words an integer >= 1 (0 gives empty answers, a negative one cuts from the end), soft_cut_ratio in [0, 1]."""
    number_in("program.answer.max_words", max_words, 1, integer=True)
    number_in("program.answer.soft_cut_ratio", soft_cut_ratio, 0, 1)
