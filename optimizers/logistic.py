"""`optimizer=logistic`: fit the learned non-LLM ArchEHR heads (evidence, alignment) against their subtask's metric.

For each stage: the features of every training case (`programs/archehr/no_lm/features.py`), a logistic regression
on them (scikit-learn, standardised features, L2), then the selection rule (threshold / relative / minimum) that
maximises the subtask's pooled micro F1 over out-of-fold probabilities of the training cases (an inner
cross-validation, so the rule is not fitted on probabilities the scorer saw its own labels for). Evidence is fitted
against Subtask 2 strict micro F1 (essential sentences), alignment against Subtask 4 micro F1.

`LogisticFit.compile(student, trainset=...)` is a DSPy teleprompter: it returns a copy of the student whose learned
stages (a `LogisticHead` parameter named `scorer`) are fitted on the training cases, the features computed with the
student's own question stage, as the program computes them. `task=compile optimizer=logistic` runs it like
bootstrap / MIPROv2 / GEPA (runners/compile.py: before/after on data.val, the report, program.save()).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import dspy
import numpy as np

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
from programs.archehr.no_lm.learned import select_by_probability, select_links
from tasks.archehr.data import Case, KeyCase

EVIDENCE_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                 "relative": [0.0, 0.5, 0.6, 0.7, 0.8, 0.9], "min_selected": [1, 2, 3]}
C_GRID = (0.03, 0.1, 0.3, 1.0)   # L2 regularisation strengths tried (inverse: smaller is stronger)
ALIGNMENT_GRID = {"threshold": [round(x, 3) for x in np.arange(0.05, 0.951, 0.025)],
                  "relative": [0.0, 0.3, 0.5, 0.7], "min_links": [0, 1]}


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


# --- the scorer -------------------------------------------------------------------------------------------------
def fit_scorer(x: np.ndarray, y: np.ndarray, features: tuple[str, ...], c: float = 1.0,
               feature_set: str = "", class_weight: str | None = None) -> LogisticHead:
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    if len(set(y.tolist())) < 2:  # one class only (a tiny training set): the base rate, no weights
        rate = min(max(float(y.mean()) if len(y) else 0.5, 1e-3), 1 - 1e-3)
        return LogisticHead(feature_set, features).set(mean, scale, np.zeros(len(features)),
                                                       float(np.log(rate / (1 - rate))))
    model = LogisticRegression(C=c, max_iter=5000, class_weight=class_weight)
    model.fit((x - mean) / scale, y.astype(int))
    return LogisticHead(feature_set, features).set(mean, scale, model.coef_[0].copy(), float(model.intercept_[0]))


def _folds(n: int, k: int, seed: int = 0) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    return [order[i::k] for i in range(k)] if n >= 2 else [order]


def _f1(tp: int, n_pred: int, n_gold: int) -> float:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


# --- evidence ---------------------------------------------------------------------------------------------------
def evidence_f1(cases: list[EvidenceCase], probs: list[np.ndarray], selection: dict[str, Any]) -> float:
    """Subtask 2 strict micro F1 (x100) of the selection rule over these cases."""
    tp = n_pred = n_gold = 0
    for case, p in zip(cases, probs, strict=True):
        chosen = select_by_probability(p, case.candidates, **selection)
        tp += int(case.y[chosen].sum()) if chosen else 0
        n_pred += len(chosen)
        n_gold += int(case.y.sum())
    return 100 * _f1(tp, n_pred, n_gold)


def evidence_probabilities(cases: list[EvidenceCase], scorer: LogisticHead) -> list[np.ndarray]:
    return [np.where(c.candidates, scorer.probabilities(c.x), 0.0) for c in cases]


def _out_of_fold(cases: list, fit, predict, k: int) -> list[np.ndarray]:
    probs: list[np.ndarray | None] = [None] * len(cases)
    for held in _folds(len(cases), min(k, len(cases))):
        held_set = set(held.tolist())
        train = [c for i, c in enumerate(cases) if i not in held_set]
        scorer = fit(train or cases)
        for i in held:
            probs[i] = predict([cases[i]], scorer)[0]
    return probs  # type: ignore[return-value]


def _fit_chosen_c(cases: list, make_fit, probabilities, grid: dict[str, list], score, c: float | None,
                  inner_folds: int) -> tuple[LogisticHead, dict[str, Any], float, float]:
    """(scorer fitted on every case, selection rule, its out-of-fold F1, C): the regularisation C (given, or the one
    of C_GRID whose out-of-fold F1 with its best selection rule is highest) and the rule are both chosen on
    probabilities of cases the scorer was not fitted on."""
    best: tuple[float, float, dict[str, Any]] | None = None
    for value in (c,) if c is not None else C_GRID:
        oof = _out_of_fold(cases, make_fit(value), probabilities, inner_folds)
        selection, f1 = best_selection(grid, lambda sel, oof=oof: score(oof, sel))
        if best is None or f1 > best[0] + 1e-9:
            best = (f1, value, selection)
    f1, value, selection = best  # type: ignore[misc]
    return make_fit(value)(cases), selection, f1, value


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

    scorer, selection, oof_f1, chosen = _fit_chosen_c(cases, make_fit, evidence_probabilities, EVIDENCE_GRID,
                                                      lambda oof, sel: evidence_f1(cases, oof, sel), c, inner_folds)
    return {"feature_set": EVIDENCE_FEATURE_SET, "scorer": scorer, "selection": _plain(selection),
            "fit": {"cases": len(cases), "sentences": int(sum(len(x.y) for x in cases)),
                    "essential": int(sum(x.y.sum() for x in cases)), "C": chosen,
                    "strict_micro_f1_out_of_fold": round(oof_f1, 2),
                    "strict_micro_f1_in_sample": round(evidence_f1(cases, evidence_probabilities(cases, scorer),
                                                                   selection), 2)}}


def _plain(selection: dict[str, Any]) -> dict[str, Any]:
    """JSON-plain numbers (numpy floats print as np.float64 in messages)."""
    return {k: float(v) if isinstance(v, float) else v for k, v in selection.items()}


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
    return 100 * _f1(tp, n_pred, n_gold)


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

    scorer, selection, oof_f1, chosen = _fit_chosen_c(
        cases, make_fit, alignment_probabilities, ALIGNMENT_GRID,
        lambda oof, sel: alignment_f1(cases, oof, sel, max_citations), c, inner_folds)
    return {"feature_set": ALIGNMENT_FEATURE_SET, "scorer": scorer, "selection": _plain(selection),
            "fit": {"cases": len(cases), "pairs": int(sum(x.y.size for x in cases)),
                    "links": int(sum(x.gold for x in cases)), "C": chosen, "max_citations": max_citations,
                    "micro_f1_out_of_fold": round(oof_f1, 2),
                    "micro_f1_in_sample": round(alignment_f1(cases, alignment_probabilities(cases, scorer),
                                                             selection, max_citations), 2)}}


def best_selection(grid: dict[str, list], score) -> tuple[dict[str, Any], float]:
    """The grid point with the best score (ties: the first, i.e. the lowest values in grid order)."""
    best, best_score = None, -1.0
    for values in itertools.product(*grid.values()):
        selection = dict(zip(grid, values, strict=True))
        value = score(selection)
        if value > best_score + 1e-9:
            best, best_score = selection, value
    return best or {}, best_score




def fit_parts(stages: list[str], cases: list[Case], key: dict[str, KeyCase], question_stage: Any, embedder: Any,
              max_citations: int = 3, c: float | None = None) -> dict[str, dict[str, Any]]:
    """The fitted parts of `stages` (evidence, alignment) on these cases."""
    parts: dict[str, dict[str, Any]] = {}
    if "evidence" in stages:
        parts["evidence"] = fit_evidence(evidence_cases(cases, key, question_stage, embedder), c)
    if "alignment" in stages:
        parts["alignment"] = fit_alignment(alignment_cases(cases, key, embedder), max_citations, c)
    return parts


def learned_heads(program: dspy.Module) -> dict[str, Any]:
    """{stage name: module} of the program's stages with a LogisticHead named `scorer` (evidence, alignment)."""
    heads = {}
    for name, module in program.named_sub_modules():
        head = getattr(module, "scorer", None)
        if isinstance(head, LogisticHead) and name.rsplit(".", 1)[-1] in ("evidence", "alignment"):
            heads[name.rsplit(".", 1)[-1]] = module
    return heads


class LogisticFit(dspy.teleprompt.Teleprompter):
    """Fits every learned head of the student (its evidence and alignment stages with a `scorer`) on `trainset`
    (ArchEHR cases with a key). `c`: the L2 strength (null: chosen by inner cross-validation from C_GRID)."""

    def __init__(self, metric: Any = None, c: float | None = None) -> None:
        super().__init__()
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0):
            from common.errors import ConfigError

            raise ConfigError(f"optimizer.teleprompter.c must be a positive number or null, not {c!r}")
        self.metric, self.c = metric, c

    def compile(self, student: dspy.Module, *, trainset: list[dspy.Example], valset: list | None = None,
                **_: Any) -> dspy.Module:
        from common.errors import ConfigError

        program = student.deepcopy()
        heads = learned_heads(program)
        if not heads:
            raise ConfigError("optimizer=logistic: the program has no learned head to fit; choose "
                              "program/archehr/evidence=learned and/or program/archehr/alignment=learned")
        cases = [ex.case for ex in trainset if getattr(ex, "key", None) is not None]
        key = {ex.case.case_id: ex.key for ex in trainset if getattr(ex, "key", None) is not None}
        with_note = [c for c in cases if c.sentences]
        if not with_note:
            raise ConfigError("optimizer=logistic: no training case has a note and a key (data.train, data.train_key)")
        if "alignment" in heads and not any(key[c.case_id].answer_sentences for c in with_note):
            raise ConfigError("optimizer=logistic: the alignment head needs clinician_answer_sentences with citations "
                              "in data.train_key; choose program/archehr/alignment=similarity to fit evidence only")
        if "evidence" in heads and not any(key[c.case_id].essential for c in with_note):
            raise ConfigError("optimizer=logistic: no training case has an essential sentence in data.train_key")
        embedder = next(iter(heads.values())).embedder
        max_citations = int(getattr(heads.get("alignment"), "max_citations", 3))
        parts = fit_parts(list(heads), with_note, key, program.question, embedder, max_citations, self.c)
        for name, part in parts.items():
            scorer = part["scorer"]
            fit = {**part["fit"], "case_ids": sorted(c.case_id for c in with_note)}
            heads[name].scorer.set(scorer.mean, scorer.scale, scorer.coef, scorer.intercept, part["selection"], fit)
        return program
