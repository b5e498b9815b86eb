"""Cross-validated evidence heads on the learned head's features, on an LM reader's features (lms/reader.py), both
side by side, and the reader stage as it is fitted (issue #70).

    python benchmarks/archehr_reader_cv.py [--forms question/last question/note_mean ...] [--threads auto]

Cases: the 66 hand-written cases with their keys (dev_cases.xml + realistic_cases_a/b.xml), in the folds of
benchmarks/archehr_no_lm_cv.py (the same seed holds out the same cases). The questions are the ones the program's
own question stage writes (as task=compile fits the head), the head's features computed as its fit computes them
(programs/archehr/evidence/fit.py). Per row and outer fold, everything is fitted on the other folds only and the
held-out fold is scored once:

* learned head as compiled / reader stage: the stages' own fits (evidence/fit.py; evidence/reader_fit.py, the
  reader's log-odds stacked as one column beside the head's), their C and selection rule on inner folds;
* the other rows: one logistic regression (standardised, class-balanced) over the named columns, its C (C_VALUES)
  and selection rule (threshold / relative / minimum) chosen on inner out-of-fold probabilities.

Features are computed once and kept under benchmarks/.cache/reader_cv/ (gitignored: the reader's vectors, the
question candidates and the sentence vectors in DSPy's cache there, the feature matrices in .npz files), so a rerun
only fits and scores. Seconds per case are measured apart: each form read afresh (no cache) in a fresh process on a
few cases, the model load and the process's resident memory printed beside them (timing_<model>.json there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy  # noqa: E402
import numpy as np  # noqa: E402
from hydra.utils import instantiate  # noqa: E402

from benchmarks.archehr_no_lm_cv import LEARNED_STAGES, NO_LM, case_folds, load_sets  # noqa: E402
from common.config_groups import compose_config  # noqa: E402
from common.logistic_fit import fit_chosen_c, fit_scorer  # noqa: E402
from programs.archehr.evidence.features import EVIDENCE_FEATURES  # noqa: E402
from programs.archehr.evidence.fit import (  # noqa: E402
    EVIDENCE_GRID,
    EvidenceCase,
    HeadColumns,
    evidence_cases,
    evidence_f1,
    fit_evidence,
)
from programs.archehr.evidence.reader import READER_C_GRID  # noqa: E402
from programs.archehr.evidence.reader_fit import fit_stacked, reader_log_odds  # noqa: E402
from programs.archehr.shared.selection import select_by_probability  # noqa: E402
from runners.program import contract_for  # noqa: E402
from tasks.archehr.scoring import score_subtask2  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "reader_cv"
C_VALUES = (0.003, 0.01, 0.03, 0.1, 0.3)  # the reader's 576+ columns need stronger L2 than the head's own grid


class RecordedQuestions:
    """The program's question stage, each question kept: the reader reads the very questions the head's features
    used."""

    def __init__(self, stage: Any) -> None:
        self.stage, self.questions = stage, []

    def __call__(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        prediction = self.stage(patient_narrative, patient_question)
        self.questions.append(prediction.clinician_question)
        return prediction


def head_features(by_id: dict, key: dict, ids: list[str]) -> tuple[list[EvidenceCase], dict[str, str]]:
    """The learned head's features of every case (kept in head.npz) and the questions they used."""
    path = CACHE / "head.npz"
    cases = [by_id[c] for c in ids]
    if path.is_file():
        kept = np.load(path, allow_pickle=False)
        questions = dict(zip(ids, kept["questions"].tolist(), strict=True))
        out = [EvidenceCase(c, kept[f"x_{c}"], kept[f"y_{c}"], kept[f"candidates_{c}"],
                            [s.id for s in by_id[c].sentences], kept[f"supplementary_{c}"]) for c in ids]
        return out, questions
    cfg = compose_config(*NO_LM, *LEARNED_STAGES)
    embedder = instantiate(cfg.program.embedder)
    program = contract_for(cfg).build(cfg, None, embedder=embedder)  # the shipped question stage
    recorded = RecordedQuestions(program.question)
    out = evidence_cases(cases, key, recorded, embedder)
    if [c.case_id for c in out] != ids:
        raise SystemExit("every case needs sentences and a key here")
    questions = dict(zip(ids, recorded.questions, strict=True))
    arrays = {"questions": np.array([questions[c] for c in ids])}
    for case in out:
        arrays.update({f"x_{case.case_id}": case.x, f"y_{case.case_id}": case.y,
                       f"candidates_{case.case_id}": case.candidates,
                       f"supplementary_{case.case_id}": case.supplementary})
    np.savez(path, **arrays)
    return out, questions


def reader_features(form: str, by_id: dict, ids: list[str], questions: dict[str, str], threads: Any,
                    model: str) -> dict[str, np.ndarray]:
    """{case: (sentences, dim)} of one reader form ("<form>/<pooling>"), kept in reader_<model>_<form>.npz with the
    questions it read (other questions: read again)."""
    path = CACHE / f"reader_{model}_{form.replace('/', '_')}.npz"
    if path.is_file():
        kept = np.load(path, allow_pickle=False)
        if kept["questions"].tolist() == [questions[c] for c in ids]:
            return {c: kept[f"x_{c}"] for c in ids}
    from lms.reader import GGUFReader

    prompt_form, pooling = form.split("/")
    reader = GGUFReader(model=model, form=prompt_form, pooling=pooling, threads=threads, cache=True)
    out, start = {}, time.perf_counter()
    for n, c in enumerate(ids):
        case = by_id[c]
        out[c] = reader.read(questions[c], [s.text for s in case.sentences], case.patient_narrative)
        print(f"\r{form}: {n + 1}/{len(ids)} cases, {time.perf_counter() - start:.0f} s", end="", file=sys.stderr)
    print(file=sys.stderr)
    np.savez(path, questions=np.array([questions[c] for c in ids]), **{f"x_{c}": out[c] for c in ids})
    return out


def time_forms(forms: list[str], by_id: dict, half: dict[str, str], questions: dict[str, str], threads: Any,
               model: str, n: int) -> dict[str, dict[str, float]]:
    """Seconds per case of each form read afresh (no cache) on the first n clean and n realistic cases, in a fresh
    process per form (the model load and its resident memory included apart); kept in timing_<model>.json."""
    import subprocess

    path = CACHE / f"timing_{model}.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    for form in forms:
        if form in kept:
            continue
        ids = [c for c in sorted(by_id) if half[c] == "clean"][:n] + [c for c in sorted(by_id) if half[c] != "clean"][:n]
        job = json.dumps({"form": form, "model": model, "threads": threads, "cases": ids,
                          "questions": [questions[c] for c in ids]})
        done = subprocess.run([sys.executable, __file__, "--time-one", job], capture_output=True, text=True,
                              check=True)
        kept[form] = json.loads(done.stdout.strip().splitlines()[-1])
        path.write_text(json.dumps(kept, indent=1))
    return {form: kept[form] for form in forms}


def time_one(job: dict[str, Any]) -> None:
    """One form's timing in this fresh process (time_forms): prints one JSON line."""
    from lms.reader import GGUFReader

    by_id = load_sets()[0]
    before = _rss_mb()
    start = time.perf_counter()
    prompt_form, pooling = job["form"].split("/")
    reader = GGUFReader(model=job["model"], form=prompt_form, pooling=pooling, threads=job["threads"], cache=False)
    reader.dim  # noqa: B018 (loads the model)
    load = time.perf_counter() - start
    load_avg, start = os.getloadavg()[0], time.perf_counter()
    for c, question in zip(job["cases"], job["questions"], strict=True):
        reader.read(question, [s.text for s in by_id[c].sentences], by_id[c].patient_narrative)
    seconds = time.perf_counter() - start
    sentences = sum(len(by_id[c].sentences) for c in job["cases"])
    print(json.dumps({"seconds_per_case": seconds / len(job["cases"]), "sentences_per_case": sentences / len(
        job["cases"]), "seconds_per_sentence": seconds / sentences, "load_seconds": load,
        "rss_mb": _rss_mb() - before, "threads": str(job["threads"]), "load_average": (load_avg + os.getloadavg()[0]) / 2,
        "cases": len(job["cases"])}))


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def with_columns(cases: list[EvidenceCase], blocks: list[dict[str, np.ndarray]] | None) -> list[EvidenceCase]:
    """The cases with x replaced by the chosen feature blocks side by side (None: the head's features alone)."""
    if blocks is None:
        return cases
    return [EvidenceCase(c.case_id, np.column_stack([b[c.case_id] for b in blocks]).astype(float), c.y, c.candidates,
                         c.ids, c.supplementary) for c in cases]


def fit_balanced(train: list[EvidenceCase]) -> tuple[Any, dict[str, Any], float]:
    """(scorer, selection rule, C) fitted as the head's fit fits (essential against not-relevant rows, C and the
    rule on inner out-of-fold probabilities), class-balanced, over C_VALUES."""
    names = tuple(f"f{i}" for i in range(train[0].x.shape[1]))

    def make_fit(value: float):
        def fit(cases: list[EvidenceCase]):
            keep = [case.candidates & ~case.supplementary for case in cases]
            return fit_scorer(np.vstack([case.x[k] for case, k in zip(cases, keep, strict=True)]),
                              np.concatenate([case.y[k] for case, k in zip(cases, keep, strict=True)]),
                              names, value, "reader_cv", class_weight="balanced")
        return fit

    def probabilities(cases: list[EvidenceCase], scorer: Any) -> list[np.ndarray]:
        return [np.where(c.candidates, scorer.probabilities(c.x), 0.0) for c in cases]

    scorer, selection, _, value = fit_chosen_c(train, make_fit, probabilities, EVIDENCE_GRID,
                                               lambda oof, sel: evidence_f1(train, oof, sel), None, 5, C_VALUES)
    return scorer, selection, value


def cross_validate(cases: list[EvidenceCase], folds: list[set[str]], compiled_head: bool = False,
                   stacked: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Out-of-fold probabilities and selections pooled over the held-out folds, and the C chosen per fold.
    `stacked`: the reader's vectors, fitted as the reader stage fits them (evidence/reader_fit.py: its regression's
    log-odds as one column beside the head's, the head fitted by evidence/fit.py)."""
    probs: dict[str, np.ndarray] = {}
    chosen: dict[str, list[str]] = {}
    cs = []
    for held in folds:
        train = [c for c in cases if c.case_id not in held]
        test = [c for c in cases if c.case_id in held]
        if stacked is not None:
            width = next(iter(stacked.values())).shape[1]
            columns = HeadColumns("reader_cv_stacked", (*EVIDENCE_FEATURES, "reader_log_odds"), lambda *_: None)
            part = fit_stacked(train, stacked, columns, "reader_cv", tuple(f"r{i}" for i in range(width)),
                               READER_C_GRID)
            test = [EvidenceCase(c.case_id, np.column_stack([c.x, reader_log_odds(part["reader"], stacked[c.case_id])]),
                                 c.y, c.candidates, c.ids, c.supplementary) for c in test]
            scorer, selection = part["scorer"], part["selection"]
            c_value: Any = f"{part['fit']['C']}/{part['fit']['reader_C']}"
        elif compiled_head:
            part = fit_evidence(train)
            scorer, selection, c_value = part["scorer"], part["selection"], part["fit"]["C"]
        else:
            scorer, selection, c_value = fit_balanced(train)
        cs.append(c_value)
        for case in test:
            p = np.where(case.candidates, scorer.probabilities(case.x), 0.0)
            probs[case.case_id] = p
            picked = select_by_probability(p, case.candidates, float(selection["threshold"]),
                                           float(selection["relative"]), int(selection["min_selected"]))
            chosen[case.case_id] = [case.ids[i] for i in picked]
    return {"probs": probs, "chosen": chosen, "C": cs}


def ranking(cases: list[EvidenceCase], probs: dict[str, np.ndarray]) -> dict[str, float]:
    """Essential AUC / AP and essential+supplementary AUC / AP over the non-header sentences, pooled."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    p = np.concatenate([probs[c.case_id][c.candidates] for c in cases])
    essential = np.concatenate([c.y[c.candidates] for c in cases])
    relevant = np.concatenate([(c.y + c.supplementary)[c.candidates] > 0 for c in cases])
    return {"auc": roc_auc_score(essential, p), "ap": average_precision_score(essential, p),
            "auc_rel": roc_auc_score(relevant, p), "ap_rel": average_precision_score(relevant, p)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forms", nargs="+", default=["question/last", "question/note_mean",
                                                        "question_message/note_mean"],
                        help="reader forms <form>/<pooling> (lms/reader.py: FORMS x POOLINGS)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--threads", default="auto", help="the reader's threads: auto or a number")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", nargs="*", help="only the rows whose name holds one of these words")
    parser.add_argument("--time-cases", type=int, default=3, help="clean and realistic cases each, timed afresh")
    parser.add_argument("--time-one", help=argparse.SUPPRESS)
    parser.add_argument("--timing-only", action="store_true", help="only the seconds-per-case table (any --model)")
    parser.add_argument("--features-only", action="store_true", help="compute and keep the features, no CV")
    args = parser.parse_args()
    if args.time_one:
        return time_one(json.loads(args.time_one))
    threads = args.threads if args.threads == "auto" else int(args.threads)
    CACHE.mkdir(parents=True, exist_ok=True)
    dspy.configure_cache(disk_cache_dir=str(CACHE / "dspy"), enable_memory_cache=True)
    by_id, key, half, _ = load_sets()
    ids, folds = case_folds(by_id, args.folds, args.seed)
    head, questions = head_features(by_id, key, ids)
    if args.timing_only:
        return print_timing(time_forms(args.forms, by_id, half, questions, threads, args.model, args.time_cases),
                            args.model, args.time_cases)
    readers = {form: reader_features(form, by_id, ids, questions, threads, args.model) for form in args.forms}
    if args.features_only:
        return

    rows: list[tuple[str, list[dict[str, np.ndarray]] | None, bool, dict[str, np.ndarray] | None]] = [
        ("**learned head** as compiled (evidence=learned, evidence/fit.py)", None, True, None),
        ("head's features, balanced", None, False, None)]
    for form, vectors in readers.items():
        rows.append((f"reader {form}", [vectors], False, None))
        rows.append((f"head's features + reader {form}", [{c.case_id: c.x for c in head}, vectors], False, None))
        rows.append((f"**reader stage** (evidence=reader, {form}: the head + the reader's log-odds, stacked)", None,
                     False, vectors))
    subsets = {"all": ids, "clean": [c for c in ids if half[c] == "clean"],
               "realistic": [c for c in ids if half[c] == "realistic"]}
    n_sentences = sum(len(c.y) for c in head)
    print(f"{len(ids)} cases ({', '.join(f'{k} {len(v)}' for k, v in subsets.items())}), {n_sentences} sentences, "
          f"{int(sum(c.y.sum() for c in head))} essential; {args.folds} folds, seed {args.seed} (the folds of "
          f"archehr_no_lm_cv.py); reader {args.model}\n")
    print("| features | essential AUC | AP | ess.+suppl. AUC | AP | ST2 strict micro F1 all (P/R) | clean | "
          "realistic | C per fold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, blocks, compiled, stacked in rows:
        if args.rows and not any(word in name for word in args.rows):
            continue
        cases = with_columns(head, blocks)
        out = cross_validate(cases, folds, compiled_head=compiled, stacked=stacked)
        r = ranking(cases, out["probs"])
        cells = []
        for subset in subsets.values():
            s = score_subtask2({c: out["chosen"][c] for c in subset}, {c: key[c] for c in subset})
            cells.append(f"{s['strict_micro_f1']:.1f}" + (f" ({s['strict_micro_precision']:.0f}/"
                                                            f"{s['strict_micro_recall']:.0f})" if subset is ids else ""))
        width = cases[0].x.shape[1] + (stacked is not None)
        print(f"| {name} ({width} columns) | {r['auc']:.3f} | {r['ap']:.3f} | {r['auc_rel']:.3f} | "
              f"{r['ap_rel']:.3f} | " + " | ".join(cells) + f" | {', '.join(str(c) for c in out['C'])} |", flush=True)
    print_timing(time_forms(args.forms, by_id, half, questions, threads, args.model, args.time_cases), args.model,
                 args.time_cases)


def print_timing(timing: dict[str, dict[str, float]], model: str, n: int) -> None:
    print(f"\nSeconds per case of the {model} reader, each form read afresh (no cache) in a fresh process on {n} clean "
          f"+ {n} realistic cases; the model load and the process's resident memory apart:\n")
    print("| reader form | seconds per case | sentences per case | seconds per sentence | threads | load average | "
          "model load s | resident MB (reader process) |")
    print("|---|---|---|---|---|---|---|---|")
    for form, t in timing.items():
        print(f"| {form} | {t['seconds_per_case']:.2f} | {t['sentences_per_case']:.0f} | {t['seconds_per_sentence']:.3f} | "
              f"{t['threads']} | {t['load_average']:.1f} | {t['load_seconds']:.1f} | {t['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
