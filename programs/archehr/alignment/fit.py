"""How the learned alignment head is fitted (evidence/fit.py is its twin): the design matrix of the key's reference
answer sentences and citations, then the L2 strength and the selection rule chosen for Subtask 4 micro F1 on
out-of-fold probabilities."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from common.logistic_fit import f1, fit_chosen_c, fit_scorer, plain
from common.parameters import LogisticHead
from programs.archehr.alignment.features import ALIGNMENT_FEATURE_SET, ALIGNMENT_FEATURES, alignment_features
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.selection import select_links
from tasks.archehr.data import Case, KeyCase

ALIGNMENT_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                  "relative": [0.0, 0.3, 0.5, 0.7], "min_links": [0, 1]}


@dataclass
class AlignmentCase:
    case_id: str
    x: np.ndarray            # (answer sentences, candidates, features)
    y: np.ndarray            # (answer sentences, candidates): 1 = cited
    answer_ids: list[str]
    candidate_ids: list[str]
    gold: int                # reference links (some may cite a header: never predictable, still counted)


def alignment_cases(cases: list[Case], key: dict[str, KeyCase], embedder: Any) -> list[AlignmentCase]:
    out = []
    for case in cases:
        kc = key.get(case.case_id)
        if kc is None or not kc.answer_sentences or not case.sentences:
            continue
        candidates = [s for s in case.sentences if not is_header(s.text)]
        answers = [text for _, text, _ in kc.answer_sentences]
        x = alignment_features(embedder, answers, [s.text for s in candidates])
        y = np.array([[float(s.id in cites) for s in candidates] for _, _, cites in kc.answer_sentences])
        out.append(AlignmentCase(case.case_id, x, y, [a for a, _, _ in kc.answer_sentences],
                                 [s.id for s in candidates], sum(len(c) for _, _, c in kc.answer_sentences)))
    return out


def alignment_f1(cases: list[AlignmentCase], probs: list[np.ndarray], selection: dict[str, Any],
                 max_citations: int) -> float:
    """Subtask 4 micro F1 (x100) of the selection rule over these cases."""
    tp = n_pred = n_gold = 0
    for case, p in zip(cases, probs, strict=True):
        links = {(case.answer_ids[i], case.candidate_ids[j]) for i, row in enumerate(p)
                 for j in select_links(row, max_citations=max_citations, **selection)}
        tp += sum(int(case.y[case.answer_ids.index(a), case.candidate_ids.index(s)]) for a, s in links)
        n_pred += len(links)
        n_gold += case.gold
    return 100 * f1(tp, n_pred, n_gold)


def alignment_probabilities(cases: list[AlignmentCase], scorer: LogisticHead) -> list[np.ndarray]:
    return [scorer.probabilities(c.x) for c in cases]


def fit_alignment(cases: list[AlignmentCase], max_citations: int = 3, c: float | None = None,
                  inner_folds: int = 5) -> dict[str, Any]:
    def make_fit(value: float):
        def fit(train: list[AlignmentCase]) -> LogisticHead:
            x = np.vstack([case.x.reshape(-1, case.x.shape[-1]) for case in train])
            y = np.concatenate([case.y.reshape(-1) for case in train])
            return fit_scorer(x, y, ALIGNMENT_FEATURES, value, ALIGNMENT_FEATURE_SET)
        return fit

    scorer, selection, oof_f1, chosen = fit_chosen_c(
        cases, make_fit, alignment_probabilities, ALIGNMENT_GRID,
        lambda oof, sel: alignment_f1(cases, oof, sel, max_citations), c, inner_folds)
    return {"feature_set": ALIGNMENT_FEATURE_SET, "scorer": scorer, "selection": plain(selection),
            "fit": {"cases": len(cases), "pairs": int(sum(x.y.size for x in cases)),
                    "links": int(sum(x.gold for x in cases)), "C": chosen, "max_citations": max_citations,
                    "micro_f1_out_of_fold": round(oof_f1, 2),
                    "micro_f1_in_sample": round(alignment_f1(cases, alignment_probabilities(cases, scorer),
                                                             selection, max_citations), 2)}}
