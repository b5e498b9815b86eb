"""Fitting a `LogisticHead` and its selection rule, whatever the features: the regression, out-of-fold
probabilities, and the choice of the L2 strength C and of the selection rule on them."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from common.parameters import LogisticHead

C_GRID = (0.03, 0.1, 0.3, 1.0)   # L2 regularisation strengths tried (inverse: smaller is stronger)


def standardisation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) per column of a design matrix; a constant column gets scale 1 (its standardised value is 0)."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    return mean, scale


def fit_scorer(x: np.ndarray, y: np.ndarray, features: tuple[str, ...], c: float = 1.0,
               feature_set: str = "", class_weight: str | None = None) -> LogisticHead:
    from sklearn.linear_model import LogisticRegression

    mean, scale = standardisation(x)
    if len(set(y.tolist())) < 2:  # one class only (a tiny training set): the base rate, no weights
        rate = min(max(float(y.mean()) if len(y) else 0.5, 1e-3), 1 - 1e-3)
        return LogisticHead(feature_set, features).set(mean, scale, np.zeros(len(features)),
                                                       float(np.log(rate / (1 - rate))))
    model = LogisticRegression(C=c, max_iter=5000, class_weight=class_weight)
    model.fit((x - mean) / scale, y.astype(int))
    return LogisticHead(feature_set, features).set(mean, scale, model.coef_[0].copy(), float(model.intercept_[0]))


def folds(n: int, k: int, seed: int = 0) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    return [order[i::k] for i in range(k)] if n >= 2 else [order]


def f1(tp: int, n_pred: int, n_gold: int) -> float:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def out_of_fold(cases: list, fit, predict, k: int) -> list[np.ndarray]:
    probs: list[np.ndarray | None] = [None] * len(cases)
    for held in folds(len(cases), min(k, len(cases))):
        held_set = set(held.tolist())
        train = [c for i, c in enumerate(cases) if i not in held_set]
        scorer = fit(train or cases)
        for i in held:
            probs[i] = predict([cases[i]], scorer)[0]
    return probs  # type: ignore[return-value]


def fit_chosen_c(cases: list, make_fit, probabilities, grid: dict[str, list], score, c: float | None,
                  inner_folds: int, c_grid: tuple[float, ...] = C_GRID) -> tuple[LogisticHead, dict[str, Any], float, float]:
    """(scorer fitted on every case, selection rule, its out-of-fold F1, C): C (given, or the best of `c_grid`) and
    the rule are both chosen on out-of-fold probabilities."""
    best: tuple[float, float, dict[str, Any]] | None = None
    for value in (c,) if c is not None else c_grid:
        oof = out_of_fold(cases, make_fit(value), probabilities, inner_folds)
        selection, f1 = best_selection(grid, lambda sel, oof=oof: score(oof, sel))
        if best is None or f1 > best[0] + 1e-9:
            best = (f1, value, selection)
    f1, value, selection = best  # type: ignore[misc]
    return make_fit(value)(cases), selection, f1, value


def plain(selection: dict[str, Any]) -> dict[str, Any]:
    """JSON-plain numbers (numpy floats print as np.float64 in messages)."""
    return {k: float(v) if isinstance(v, float) else v for k, v in selection.items()}


def best_selection(grid: dict[str, list], score) -> tuple[dict[str, Any], float]:
    """The grid point with the best score (ties: the first, i.e. the lowest values in grid order)."""
    best, best_score = None, -1.0
    for values in itertools.product(*grid.values()):
        selection = dict(zip(grid, values, strict=True))
        value = score(selection)
        if value > best_score + 1e-9:
            best, best_score = selection, value
    return best or {}, best_score
