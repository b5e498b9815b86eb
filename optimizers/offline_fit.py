"""Fit the learned non-LLM ArchEHR stages (evidence, alignment) against their subtask's metric.

For each stage: the features of every training case (`programs/archehr/offline/features.py`), a logistic regression
on them (scikit-learn, standardised features, L2), then the selection rule (threshold / relative / minimum) that
maximises the subtask's pooled micro F1 over out-of-fold probabilities of the training cases (an inner
cross-validation, so the rule is not fitted on probabilities the scorer saw its own labels for). Evidence is fitted
against Subtask 2 strict micro F1 (essential sentences), alignment against Subtask 4 micro F1.

`task=compile` with a learned stage chosen (and no LM) calls `compile_offline`: fit on data.train, score data.val
before and after, save the state (program.optimize.save_to, like a DSPy state) with its meta.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from programs.archehr.offline.evidence import is_header
from programs.archehr.offline.features import (
    ALIGNMENT_FEATURE_SET,
    ALIGNMENT_FEATURES,
    EVIDENCE_FEATURE_SET,
    EVIDENCE_FEATURES,
    alignment_features,
    evidence_features,
    split_anchor,
)
from programs.archehr.offline.learned import select_evidence, select_links
from programs.archehr.offline.learned_state import LogisticScorer, save_state
from tasks.archehr.data import Case, KeyCase

FITTABLE = {"evidence": "programs.archehr.offline.learned.LearnedEvidenceScorer",
            "alignment": "programs.archehr.offline.learned.LearnedAligner"}
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
def fit_scorer(x: np.ndarray, y: np.ndarray, features: tuple[str, ...], c: float = 1.0) -> LogisticScorer:
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    if len(set(y.tolist())) < 2:  # one class only (a tiny training set): the base rate, no weights
        rate = min(max(float(y.mean()) if len(y) else 0.5, 1e-3), 1 - 1e-3)
        return LogisticScorer(features, mean, scale, np.zeros(len(features)), float(np.log(rate / (1 - rate))))
    model = LogisticRegression(C=c, max_iter=5000)
    model.fit((x - mean) / scale, y.astype(int))
    return LogisticScorer(features, mean, scale, model.coef_[0].copy(), float(model.intercept_[0]))


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
        chosen = select_evidence(p, case.candidates, **selection)
        tp += int(case.y[chosen].sum()) if chosen else 0
        n_pred += len(chosen)
        n_gold += int(case.y.sum())
    return 100 * _f1(tp, n_pred, n_gold)


def evidence_probabilities(cases: list[EvidenceCase], scorer: LogisticScorer) -> list[np.ndarray]:
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
                  inner_folds: int) -> tuple[LogisticScorer, dict[str, Any], float, float]:
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
        def fit(train: list[EvidenceCase]) -> LogisticScorer:
            keep = [case.candidates & ~case.supplementary for case in train]
            return fit_scorer(np.vstack([case.x[k] for case, k in zip(train, keep, strict=True)]),
                              np.concatenate([case.y[k] for case, k in zip(train, keep, strict=True)]),
                              EVIDENCE_FEATURES, value)
        return fit

    scorer, selection, oof_f1, chosen = _fit_chosen_c(cases, make_fit, evidence_probabilities, EVIDENCE_GRID,
                                                      lambda oof, sel: evidence_f1(cases, oof, sel), c, inner_folds)
    return {"feature_set": EVIDENCE_FEATURE_SET, "scorer": scorer.to_json(), "selection": _plain(selection),
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


def alignment_probabilities(cases: list[AlignmentCase], scorer: LogisticScorer) -> list[np.ndarray]:
    return [scorer.probabilities(c.x) for c in cases]


def fit_alignment(cases: list[AlignmentCase], max_citations: int = 3, c: float | None = None,
                  inner_folds: int = 5) -> dict[str, Any]:
    def make_fit(value: float):
        def fit(train: list[AlignmentCase]) -> LogisticScorer:
            x = np.vstack([case.x.reshape(-1, case.x.shape[-1]) for case in train])
            y = np.concatenate([case.y.reshape(-1) for case in train])
            return fit_scorer(x, y, ALIGNMENT_FEATURES, value)
        return fit

    scorer, selection, oof_f1, chosen = _fit_chosen_c(
        cases, make_fit, alignment_probabilities, ALIGNMENT_GRID,
        lambda oof, sel: alignment_f1(cases, oof, sel, max_citations), c, inner_folds)
    return {"feature_set": ALIGNMENT_FEATURE_SET, "scorer": scorer.to_json(), "selection": _plain(selection),
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


# --- meta and the state file ------------------------------------------------------------------------------------
def data_hash(cases: list[Case], key: dict[str, KeyCase]) -> str:
    """What the state was fitted on: case texts and their labels, hashed."""
    digest = hashlib.sha256()
    for case in sorted(cases, key=lambda c: c.case_id):
        kc = key.get(case.case_id)
        digest.update(json.dumps([case.case_id, case.patient_narrative, [s.text for s in case.sentences],
                                  sorted(kc.relevance.items()) if kc else None,
                                  kc.answer_sentences if kc else None]).encode())
    return digest.hexdigest()[:16]


def library_versions() -> dict[str, str]:
    import numpy
    import sklearn

    return {"python": platform.python_version(), "numpy": numpy.__version__, "scikit-learn": sklearn.__version__}


def fit_state(stages: list[str], cases: list[Case], key: dict[str, KeyCase], question_stage: Any, embedder: Any,
              max_citations: int = 3, c: float | None = None) -> dict[str, dict[str, Any]]:
    """The fitted parts of `stages` (evidence, alignment) on these cases."""
    parts: dict[str, dict[str, Any]] = {}
    if "evidence" in stages:
        parts["evidence"] = fit_evidence(evidence_cases(cases, key, question_stage, embedder), c)
    if "alignment" in stages:
        parts["alignment"] = fit_alignment(alignment_cases(cases, key, embedder), max_citations, c)
    for part in parts.values():
        part["embedder"] = embedder.name
    return parts


def write_state(path: str | Path, parts: dict[str, dict[str, Any]], cases: list[Case], key: dict[str, KeyCase],
                extra_meta: dict[str, Any] | None = None) -> Path:
    meta = {"features": {name: {"feature_set": part["feature_set"], "names": part["scorer"]["features"]}
                         for name, part in parts.items()},
            "libraries": library_versions(), "train": {"cases": len(cases), "hash": data_hash(cases, key),
                                                       "case_ids": sorted(c.case_id for c in cases)},
            "saved": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra_meta or {})}
    return save_state(path, parts, meta)


# --- task=compile -----------------------------------------------------------------------------------------------
def fittable_stages(cfg: Any, contract: Any) -> list[str]:
    """The stages of this config whose implementation is a learned non-LLM one (fitted here, not prompted)."""
    program = cfg.program
    return [stage for stage, target in FITTABLE.items()
            if (program.get(stage) or {}).get("_target_") == target]


def stage_scores(program: Any, cases: list[Case], key: dict[str, KeyCase]) -> dict[str, float]:
    """Subtask 2 strict micro F1 and Subtask 4 micro F1 (official scorers) of the program on these cases."""
    from tasks.archehr.metrics import score_subtask2, score_subtask4

    preds = {c.case_id: program(case=c) for c in cases if c.sentences and c.case_id in key}
    scored = {cid: key[cid] for cid in preds}
    out = {"subtask_2_strict_micro_f1": round(score_subtask2({c: list(p.evidence_ids) for c, p in preds.items()},
                                                             scored)["strict_micro_f1"], 2)}
    if scored and all(k.answer_sentences for k in scored.values()) and all(
            p.alignment_source == "reference" for p in preds.values()):
        out["subtask_4_micro_f1"] = round(score_subtask4({c: p.alignment for c, p in preds.items()},
                                                         scored)["micro_f1"], 2)
    return out


def _fitted_on(cfg: Any, stages: list[str], val_ids: set[str]) -> str | None:
    """A warning when the state in use before compiling was fitted on validation cases (its "before" is then an
    in-sample score, e.g. the shipped state on the dev or realistic cases)."""
    for path in {str(cfg.program[stage].state_path) for stage in stages}:
        try:
            fitted = set(json.loads(Path(path).read_text())["meta"]["train"]["case_ids"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        shared = fitted & val_ids
        if shared:
            return (f"warning: the state in use ({path}) was fitted on {len(shared)} of the {len(val_ids)} validation "
                    "cases: its score before compiling is in-sample, not a held-out baseline")
    return None


def compile_offline(cfg: Any, contract: Any, trainset: list, valset: list, embedder: Any = None) -> float | None:
    """task=compile for the learned non-LLM stages: fit them on data.train, score data.val before (the program as
    configured) and after (with the new state), save the state to program.optimize.save_to with its meta."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from common import outputs
    from common.resources import Resources
    from optimizers.compile import evaluate
    from programs.archehr.offline.learned_state import LearnedStateError

    stages = fittable_stages(cfg, contract)
    metric_name = cfg.optimizer.metric
    metric = contract.metrics[metric_name]
    train_cases = [ex.case for ex in trainset]
    train_key = {ex.case.case_id: ex.key for ex in trainset if ex.key is not None}
    val_cases = [ex.case for ex in valset]
    val_key = {ex.case.case_id: ex.key for ex in valset if ex.key is not None}
    if not train_key:
        from common.errors import ConfigError

        raise ConfigError(f"task=compile of {stages}: data.train={cfg.data.train} has no key to fit against "
                          "(set data.train_key)")
    try:
        from optimizers.split_overlap import split_overlap

        overlap = split_overlap(trainset, valset, contract.item_id, cfg.data.get("train"), cfg.data.get("val"))
    except ImportError:  # pragma: no cover - the overlap check lives with the LM compile
        overlap = None
    if overlap:
        print(overlap.message)
    in_sample = _fitted_on(cfg, stages, {c.case_id for c in val_cases})
    if in_sample:
        print(in_sample)
    embedder = embedder or instantiate(cfg.program.embedder)
    try:
        before_program = contract.build(cfg, None, embedder=embedder)
        before = evaluate(before_program, valset, metric)
        before_stages = stage_scores(before_program, val_cases, val_key)
        print(f"{metric_name} on {len(valset)} validation cases before: {before:.4f} {before_stages}")
    except LearnedStateError as exc:  # the configured state does not fit this code: nothing to compare against
        before, before_stages = float("nan"), {}
        print(f"before: not scored ({exc})")
    question = Resources(embedder=embedder).complete(instantiate(cfg.program.question, _convert_="all"),
                                                     "program.question")
    max_citations = int((cfg.program.get("alignment") or {}).get("max_citations") or 3)
    print(f"fitting {', '.join(stages)} on {len(train_cases)} training cases ...")
    parts = fit_state(stages, train_cases, train_key, question, embedder, max_citations)
    save_to = Path(cfg.program.optimize.save_to)
    out = outputs.output_dir()
    meta = {"fitted_with": {"stages": stages, "question_stage": (cfg.program.question or {}).get("_target_"),
                            "max_citations": max_citations},
            "val": {"cases": len(val_cases), "hash": data_hash(val_cases, val_key)},
            "train_val_overlap": overlap.message if overlap else None, "before_in_sample": in_sample}
    for path in {save_to, out / "compiled_program.json"}:
        write_state(path, parts, train_cases, train_key, meta)
    after_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for stage in stages:
        after_cfg.program[stage].state_path = str(save_to)
    after_program = contract.build(after_cfg, None, embedder=embedder)
    after = evaluate(after_program, valset, metric)
    after_stages = stage_scores(after_program, val_cases, val_key)
    print(f"after fitting: {after:.4f} {after_stages}")
    scores = {"metric": metric_name, "before": before, "after": after, "objective": after,
              "stages_before": before_stages, "stages_after": after_stages, "fitted": stages,
              "fit": {name: part["fit"] for name, part in parts.items()},
              "selection": {name: part["selection"] for name, part in parts.items()}}
    # the scores go into the state's meta too: what it was fitted on and what it scored, like a DSPy state's
    for path in {save_to, out / "compiled_program.json"}:
        write_state(path, parts, train_cases, train_key, {**meta, "scores": scores})
    outputs.write_json(out / "scores.json", scores)
    rows = "\n".join(f"| {name} | {before_stages.get(name, '-')} | {after_stages.get(name, '-')} |"
                     for name in sorted({*before_stages, *after_stages}))
    outputs.write_text(out / "compile_report.md",
               f"# Compile: program={contract.name}, fitted non-LLM stages {', '.join(stages)}\n\n"
               f"{len(train_cases)} training cases ({cfg.data.train}), {len(val_cases)} validation cases "
               f"({cfg.data.val}).\n\n| on the validation cases | before | after |\n|---|---|---|\n"
               f"| {metric_name} | {before:.4f} | {after:.4f} |\n{rows}\n\n"
               f"Selection rules: {json.dumps(scores['selection'])}\n\nSaved: {save_to}\n"
               + (f"\n{overlap.message}\n" if overlap else "") + (f"\n{in_sample}\n" if in_sample else ""))
    settings = " ".join(f"program.{stage}.state_path={save_to}" for stage in stages)
    print(f"saved {save_to}; run with it: {settings}")
    return after if after == after else None  # NaN (no validation cases): no objective


# --- python -m optimizers.offline_fit: fit on several case files (the shipped state) ------------------------------
def main(argv: list[str] | None = None) -> None:
    import argparse

    from common.config_groups import compose_config
    from common.errors import ClinprogError
    from tasks.archehr.data import check_key, load_cases, load_key

    parser = argparse.ArgumentParser(description="Fit the learned non-LLM ArchEHR stages on cases + keys.")
    parser.add_argument("--cases", action="append", required=True, help="ArchEHR XML (repeatable)")
    parser.add_argument("--key", action="append", required=True, help="its key JSON (one per --cases)")
    parser.add_argument("--out", required=True, help="where to save the state (JSON)")
    parser.add_argument("overrides", nargs="*", help="config overrides (e.g. program/archehr/question=rule)")
    args = parser.parse_args(argv)
    try:
        if len(args.cases) != len(args.key):
            raise ClinprogError(f"give one --key per --cases ({len(args.cases)} cases files, {len(args.key)} keys)")
        cases, key = [], {}
        for path, key_path in zip(args.cases, args.key, strict=True):
            these, their_key = load_cases(path), load_key(key_path)
            check_key(their_key, these, key_path)
            cases += these
            key.update(their_key)
        from hydra.utils import instantiate

        from common.resources import Resources

        cfg = compose_config("program=archehr", "lm=none", *args.overrides)
        embedder = instantiate(cfg.program.embedder)
        question = Resources(embedder=embedder).complete(instantiate(cfg.program.question, _convert_="all"),
                                                         "program.question")
        parts = fit_state(list(FITTABLE), cases, key, question, embedder,
                          int(cfg.program.alignment.get("max_citations") or 3))
        path = write_state(args.out, parts, cases, key, {"fitted_with": {
            "files": list(args.cases), "question_stage": cfg.program.question.get("_target_")}})
    except ClinprogError as exc:
        raise SystemExit(f"error: {exc}") from None
    for name, part in parts.items():
        print(f"{name}: {part['fit']} selection {part['selection']}")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
