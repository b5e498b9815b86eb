"""How the learned evidence head is fitted (alignment/fit.py is its twin): the design matrix as the program computes
it, then the L2 strength and the selection rule chosen for Subtask 2 strict micro F1 on out-of-fold probabilities
(so the rule is not fitted on probabilities the scorer saw its own labels for)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.logistic_fit import C_GRID, f1, fit_chosen_c, fit_scorer, plain
from common.parameters import LogisticHead
from programs.archehr.evidence.features import EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES, evidence_features
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.selection import select_by_probability
from tasks.archehr.data import Case, KeyCase

EVIDENCE_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                 "relative": [0.0, 0.5, 0.6, 0.7, 0.8, 0.9], "min_selected": [1, 2, 3]}


@dataclass(frozen=True)
class HeadColumns:
    """A head's design matrix: its columns, how a case's rows are computed from (question, narrative, note sentences),
    and the L2 strengths its fit chooses among (a wide block such as the reader's needs stronger ones)."""

    feature_set: str
    names: tuple[str, ...]
    features: Callable[[str, str, list[str]], np.ndarray]
    c_grid: tuple[float, ...] = C_GRID


def learned_columns(embedder: Any) -> HeadColumns:
    """The learned head's own columns (evidence/features.py)."""
    return HeadColumns(EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES,
                       lambda question, narrative, texts: evidence_features(embedder, question, narrative, texts))


@dataclass
class EvidenceCase:
    case_id: str
    x: np.ndarray            # (sentences, features)
    y: np.ndarray            # 1 = essential
    candidates: np.ndarray   # non-header sentences
    ids: list[str]
    supplementary: np.ndarray  # left out of the scorer's training rows (see fit_evidence)


def evidence_cases(cases: list[Case], key: dict[str, KeyCase], question_stage: Any, embedder: Any,
                   columns: HeadColumns | None = None) -> list[EvidenceCase]:
    """Each case's features as the program computes them, the question from its own stage 1; `columns`: the head's
    (default: the learned head's own)."""
    features = (columns or learned_columns(embedder)).features
    out = []
    for case in cases:
        if not case.sentences or case.case_id not in key:
            continue
        question = question_stage(case.patient_narrative, " ".join(case.patient_question_phrases)).clinician_question
        texts = [s.text for s in case.sentences]
        essential, supplementary = key[case.case_id].essential, key[case.case_id].supplementary
        out.append(EvidenceCase(case.case_id, features(question, case.patient_narrative, texts),
                                np.array([float(s.id in essential) for s in case.sentences]),
                                np.array([not is_header(t) for t in texts], dtype=bool),
                                [s.id for s in case.sentences],
                                np.array([s.id in supplementary for s in case.sentences], dtype=bool)))
    return out


def evidence_f1(cases: list[EvidenceCase], probs: list[np.ndarray], selection: dict[str, Any]) -> float:
    """Subtask 2 strict micro F1 (x100) of the selection rule over these cases."""
    tp = n_pred = n_gold = 0
    for case, p in zip(cases, probs, strict=True):
        chosen = select_by_probability(p, case.candidates, **selection)
        tp += int(case.y[chosen].sum()) if chosen else 0
        n_pred += len(chosen)
        n_gold += int(case.y.sum())
    return 100 * f1(tp, n_pred, n_gold)


def evidence_probabilities(cases: list[EvidenceCase], scorer: LogisticHead) -> list[np.ndarray]:
    return [np.where(c.candidates, scorer.probabilities(c.x), 0.0) for c in cases]


def fit_evidence(cases: list[EvidenceCase], c: float | None = None, inner_folds: int = 5,
                 columns: HeadColumns | None = None) -> dict[str, Any]:
    """The evidence part of a state: scorer fitted on every case, C and selection rule on out-of-fold probabilities.
    Supplementary sentences are left out of the scorer's rows (+1.3 strict micro F1 in cross-validation over counting
    them as negatives); the selection rule still counts them as errors. `columns` names the cases' x columns."""
    names, feature_set, c_grid = ((columns.names, columns.feature_set, columns.c_grid) if columns is not None
                                  else (EVIDENCE_FEATURES, EVIDENCE_FEATURE_SET, C_GRID))

    def make_fit(value: float):
        def fit(train: list[EvidenceCase]) -> LogisticHead:
            keep = [case.candidates & ~case.supplementary for case in train]
            return fit_scorer(np.vstack([case.x[k] for case, k in zip(train, keep, strict=True)]),
                              np.concatenate([case.y[k] for case, k in zip(train, keep, strict=True)]),
                              names, value, feature_set)
        return fit

    scorer, selection, oof_f1, chosen = fit_chosen_c(cases, make_fit, evidence_probabilities, EVIDENCE_GRID,
                                                      lambda oof, sel: evidence_f1(cases, oof, sel), c, inner_folds,
                                                      c_grid)
    return {"feature_set": feature_set, "scorer": scorer, "selection": plain(selection),
            "fit": {"cases": len(cases), "sentences": int(sum(len(x.y) for x in cases)),
                    "essential": int(sum(x.y.sum() for x in cases)), "C": chosen,
                    "strict_micro_f1_out_of_fold": round(oof_f1, 2),
                    "strict_micro_f1_in_sample": round(evidence_f1(cases, evidence_probabilities(cases, scorer),
                                                                   selection), 2)}}
