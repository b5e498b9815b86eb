"""The learned heads' selection rules (which sentences, which links, from their probabilities), at run and fit time."""

from __future__ import annotations

import numpy as np


def select_by_probability(probabilities: np.ndarray, candidates: np.ndarray, threshold: float, relative: float,
                    min_selected: int) -> list[int]:
    """Indices (note order) of the selected sentences; `candidates` masks the sentences that may be chosen."""
    idx = np.flatnonzero(candidates)
    if not len(idx):
        return []
    p = probabilities[idx]
    best = p.max()
    chosen = set(idx[(p >= threshold) | (p >= relative * best)].tolist()) if relative > 0 else set(
        idx[p >= threshold].tolist())
    for i in idx[(-p).argsort(kind="stable")][:min_selected]:
        chosen.add(int(i))
    return sorted(chosen)


def select_links(probabilities: np.ndarray, threshold: float, relative: float, max_citations: int,
                 min_links: int) -> list[int]:
    """Column indices linked for one answer sentence, best first."""
    order = (-probabilities).argsort(kind="stable")[:max_citations]
    if not len(order):
        return []
    best = probabilities[order[0]]
    return [int(j) for n, j in enumerate(order)
            if n < min_links or (probabilities[j] >= threshold and probabilities[j] >= relative * best)]
