"""How the learned evidence and alignment heads are fitted (their `fit`, called by `task=compile optimizer=logistic`
or `optimizer=fit`): design matrices as the program computes them, each head fitted against its subtask's metric
(evidence: Subtask 2 strict micro F1 on essential sentences; alignment: Subtask 4 micro F1), the L2 strength and the
selection rule (threshold / relative / minimum) chosen on out-of-fold probabilities of the training cases (an inner
cross-validation, so the rule is not fitted on probabilities the scorer saw its own labels for)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.logistic_fit import f1, fit_chosen_c, fit_scorer, plain
from common.parameters import LogisticHead
from programs.archehr.no_lm.evidence import is_header
from programs.archehr.no_lm.features import (
    ALIGNMENT_FEATURE_SET,
    ALIGNMENT_FEATURES,
    EVIDENCE_FEATURE_SET,
    EVIDENCE_FEATURES,
    alignment_features,
    evidence_features,
    split_anchor,
)
from programs.archehr.no_lm.selection import select_by_probability, select_links
from tasks.archehr.data import Case, KeyCase

EVIDENCE_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                 "relative": [0.0, 0.5, 0.6, 0.7, 0.8, 0.9], "min_selected": [1, 2, 3]}
ALIGNMENT_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                  "relative": [0.0, 0.3, 0.5, 0.7], "min_links": [0, 1]}


def training_cases(trainset: list[dspy.Example], who: str) -> tuple[list[Case], dict[str, KeyCase]]:
    """The training cases with a note and a key, and the key; none is one line naming `who` fits."""
    key = {ex.case.case_id: ex.key for ex in trainset if getattr(ex, "key", None) is not None}
    cases = [ex.case for ex in trainset if ex.case.case_id in key and ex.case.sentences]
    if not cases:
        raise ConfigError(f"{who}: no training case has a note and a key (data.train, data.train_key)")
    return cases, key


# --- design matrices --------------------------------------------------------------------------------------------
@dataclass
class EvidenceCase:
    case_id: str
    x: np.ndarray            # (sentences, features)
    y: np.ndarray            # 1 = essential
    candidates: np.ndarray   # non-header sentences
    ids: list[str]
    supplementary: np.ndarray  # left out of the scorer's training rows (see fit_evidence)


@dataclass
class AlignmentCase:
    case_id: str
    x: np.ndarray            # (answer sentences, candidates, features)
    y: np.ndarray            # (answer sentences, candidates): 1 = cited
    answer_ids: list[str]
    candidate_ids: list[str]
    gold: int                # reference links (some may cite a header: never predictable, still counted)


def evidence_cases(cases: list[Case], key: dict[str, KeyCase], question_stage: Any, embedder: Any) -> list[EvidenceCase]:
    """Each case's features as the program computes them: the question comes from the program's own stage 1 and
    the anchor is the cascade's `both` anchor, split as the stage splits it."""
    out = []
    for case in cases:
        if not case.sentences or case.case_id not in key:
            continue
        question = question_stage(case.patient_narrative, " ".join(case.patient_question_phrases)).clinician_question
        q, narrative = split_anchor(f"{question} {case.patient_narrative}")
        texts = [s.text for s in case.sentences]
        essential, supplementary = key[case.case_id].essential, key[case.case_id].supplementary
        out.append(EvidenceCase(case.case_id, evidence_features(embedder, q, narrative, texts),
                                np.array([float(s.id in essential) for s in case.sentences]),
                                np.array([not is_header(t) for t in texts], dtype=bool),
                                [s.id for s in case.sentences],
                                np.array([s.id in supplementary for s in case.sentences], dtype=bool)))
    return out


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


# --- evidence ---------------------------------------------------------------------------------------------------
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


def fit_evidence(cases: list[EvidenceCase], c: float | None = None, inner_folds: int = 5) -> dict[str, Any]:
    """The evidence part of a state: scorer fitted on every case, C and selection rule on out-of-fold probabilities.
    The scorer learns essential against not-relevant sentences: supplementary ones (relevant context a good answer
    may use) are left out of its rows, which ranks better in cross-validation (+1.3 strict micro F1 on the
    realistic cases) than counting them as negatives; the selection rule still counts them as errors."""
    def make_fit(value: float):
        def fit(train: list[EvidenceCase]) -> LogisticHead:
            keep = [case.candidates & ~case.supplementary for case in train]
            return fit_scorer(np.vstack([case.x[k] for case, k in zip(train, keep, strict=True)]),
                              np.concatenate([case.y[k] for case, k in zip(train, keep, strict=True)]),
                              EVIDENCE_FEATURES, value, EVIDENCE_FEATURE_SET)
        return fit

    scorer, selection, oof_f1, chosen = fit_chosen_c(cases, make_fit, evidence_probabilities, EVIDENCE_GRID,
                                                      lambda oof, sel: evidence_f1(cases, oof, sel), c, inner_folds)
    return {"feature_set": EVIDENCE_FEATURE_SET, "scorer": scorer, "selection": plain(selection),
            "fit": {"cases": len(cases), "sentences": int(sum(len(x.y) for x in cases)),
                    "essential": int(sum(x.y.sum() for x in cases)), "C": chosen,
                    "strict_micro_f1_out_of_fold": round(oof_f1, 2),
                    "strict_micro_f1_in_sample": round(evidence_f1(cases, evidence_probabilities(cases, scorer),
                                                                   selection), 2)}}


# --- alignment --------------------------------------------------------------------------------------------------
def alignment_links(case: AlignmentCase, p: np.ndarray, selection: dict[str, Any], max_citations: int) -> set[tuple]:
    return {(case.answer_ids[i], case.candidate_ids[j]) for i, row in enumerate(p)
            for j in select_links(row, max_citations=max_citations, **selection)}


def alignment_f1(cases: list[AlignmentCase], probs: list[np.ndarray], selection: dict[str, Any],
                 max_citations: int) -> float:
    """Subtask 4 micro F1 (x100) of the selection rule over these cases."""
    tp = n_pred = n_gold = 0
    for case, p in zip(cases, probs, strict=True):
        links = alignment_links(case, p, selection, max_citations)
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


def fit_evidence_head(trainset: list[dspy.Example], question_stage: Any, embedder: Any,
                      c: float | None = None) -> dict[str, Any]:
    """The evidence head's fit on the training examples, the features computed with `question_stage`'s questions."""
    cases, key = training_cases(trainset, "the learned evidence head")
    if not any(key[c_.case_id].essential for c_ in cases):
        raise ConfigError("the learned evidence head: no training case has an essential sentence in data.train_key")
    part = fit_evidence(evidence_cases(cases, key, question_stage, embedder), c)
    part["fit"] = {**part["fit"], "case_ids": sorted(c_.case_id for c_ in cases)}
    return part


def fit_alignment_head(trainset: list[dspy.Example], embedder: Any, max_citations: int,
                       c: float | None = None) -> dict[str, Any]:
    cases, key = training_cases(trainset, "the learned alignment head")
    if not any(key[c_.case_id].answer_sentences for c_ in cases):
        raise ConfigError("the learned alignment head needs clinician_answer_sentences with citations in "
                          "data.train_key; choose program/archehr/alignment=similarity to fit evidence only")
    part = fit_alignment(alignment_cases(cases, key, embedder), max_citations, c)
    part["fit"] = {**part["fit"], "case_ids": sorted(c_.case_id for c_ in cases)}
    return part
