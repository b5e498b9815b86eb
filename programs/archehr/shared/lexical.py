"""Okapi BM25 of one query against the sentences of one note (the note is its own tiny collection)."""

from __future__ import annotations

import math
import re
from collections import Counter

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be by did do does for from had has have he her his how i in is it its me my "
                  "of on or she so than that the their them they this to was were what when where which who why "
                  "will with you your patient".split())


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


def bm25_scores(query: str, sentences: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    docs = [tokens(s) for s in sentences]
    n = len(docs)
    if not n:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for d in docs for t in set(d))
    q = set(tokens(query))
    scores = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for t in q & set(tf):
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append(score)
    return scores
