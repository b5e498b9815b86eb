"""How the reader's evidence head is fitted, stacked: a regression over the reader's vectors gives each sentence its
log-odds of being essential, out-of-fold for the training cases, one more column for the learned head's fit. One L2
strength for all 60 + 576 columns did worse (strict micro F1 65.1 side by side, 66.8 stacked, 65.5 the head alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from common.logistic_fit import fit_scorer, folds
from common.parameters import LogisticHead
from programs.archehr.evidence.fit import EvidenceCase, HeadColumns, fit_evidence

INNER_FOLDS = 5


def reader_log_odds(head: LogisticHead, vectors: np.ndarray) -> np.ndarray:
    """The reader head's log-odds of each row (clipped where its probability is 0 or 1 in float)."""
    p = np.clip(head.probabilities(vectors), 1e-9, 1 - 1e-9)
    return np.log(p / (1 - p))


def _fit(cases: list[EvidenceCase], vectors: dict[str, np.ndarray], c: float, feature_set: str,
         names: tuple[str, ...]) -> LogisticHead:
    """Essential against not-relevant rows, class-balanced: a ranking column, the head's fit sets the threshold."""
    keep = [case.candidates & ~case.supplementary for case in cases]
    return fit_scorer(np.vstack([vectors[case.case_id][k] for case, k in zip(cases, keep, strict=True)]),
                      np.concatenate([case.y[k] for case, k in zip(cases, keep, strict=True)]),
                      names, c, feature_set, class_weight="balanced")


def fit_reader_block(cases: list[EvidenceCase], vectors: dict[str, np.ndarray], feature_set: str,
                     names: tuple[str, ...], c_grid: tuple[float, ...]) -> tuple[LogisticHead, dict[str, np.ndarray], float]:
    """(reader head fitted on every case, {case id: out-of-fold log-odds}, its C: the value of `c_grid` whose
    out-of-fold log-odds rank the essential sentences best)."""
    from sklearn.metrics import roc_auc_score

    essential = np.concatenate([case.y[case.candidates] for case in cases])
    best: tuple[float, float, dict[str, np.ndarray]] | None = None
    for value in c_grid:
        oof: dict[str, np.ndarray] = {}
        for held in folds(len(cases), min(INNER_FOLDS, len(cases))):
            held_ids = {cases[i].case_id for i in held.tolist()}
            head = _fit([c for c in cases if c.case_id not in held_ids] or cases, vectors, value, feature_set, names)
            oof.update({cid: reader_log_odds(head, vectors[cid]) for cid in held_ids})
        scores = np.concatenate([oof[case.case_id][case.candidates] for case in cases])
        auc = roc_auc_score(essential, scores) if 0 < essential.sum() < len(essential) else 0.5
        if best is None or auc > best[0] + 1e-9:
            best = (auc, value, oof)
    _, value, oof = best  # type: ignore[misc]
    return _fit(cases, vectors, value, feature_set, names), oof, value


def fit_stacked(cases: list[EvidenceCase], vectors: dict[str, np.ndarray], columns: HeadColumns,
                reader_feature_set: str, reader_names: tuple[str, ...], reader_c_grid: tuple[float, ...],
                c: float | None = None) -> dict[str, Any]:
    """fit_evidence's part for the learned columns + the reader's out-of-fold log-odds (last in `columns`), with the
    reader head under "reader"."""
    reader, oof, reader_c = fit_reader_block(cases, vectors, reader_feature_set, reader_names, reader_c_grid)
    stacked = [EvidenceCase(case.case_id, np.column_stack([case.x, oof[case.case_id]]), case.y, case.candidates,
                            case.ids, case.supplementary) for case in cases]
    part = fit_evidence(stacked, c, columns=columns)
    part["reader"] = reader
    part["fit"] = {**part["fit"], "reader_C": reader_c}
    return part
