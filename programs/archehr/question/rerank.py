"""What the fine-tuned question stage reranks its candidates by, besides their log-probability: the share of their
content words the message uses, and how common their opening is among the training references."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, imported on first use: `import sklearn` costs a cold process ~2 s."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def content_stems(text: str) -> set[str]:
    """Stems of the words that carry content (no stop word, no single letter); each word at most 40 characters."""
    words = [w[:40] for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _stop_words()]
    return set(_stemmer().stemWords(words))


def coverage(question: str, message_stems: set[str]) -> float:
    """Share of the question's content stems that the message uses (0 when it has none)."""
    stems = content_stems(question)
    return len(stems & message_stems) / len(stems) if stems else 0.0


def opening_penalties(prior: dict[str, dict[str, float]]) -> dict[str, float]:
    """{4-word opening: its largest share of the training references over the registers}."""
    out: dict[str, float] = {}
    for shares in prior.values():
        for key, share in shares.items():
            out[key] = max(out.get(key, 0.0), float(share))
    return out
