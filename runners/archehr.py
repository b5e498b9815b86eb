"""`program=archehr`: run the cascade over cases, write predictions and submissions, score with a key."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dspy
from omegaconf import DictConfig, OmegaConf

from lms import build_role_lms
from programs.archehr import ArchEHRCascade
from programs.archehr.pipeline import ROLES
from runners.common import bertscore_config, configure_dspy, output_dir, run_resumable, write_json
from tasks.archehr.data import Case, load_cases, load_key
from tasks.archehr.metrics import (
    MetricsConfig,
    score_subtask1,
    score_subtask2,
    score_subtask3,
    score_subtask4,
)
from tasks.archehr.submission import SUBMISSION_FILES, PredictionLog, read_submission, write_submissions


def load_question_demos(path: str | None, ids: list[str]) -> list[dspy.Example]:
    """Few-shot demos for stage 1 from the public dev pairs (patient narrative -> clinician question)."""
    if not path or not ids:
        return []
    by_id = {c.case_id: c for c in load_cases(path)}
    missing = [i for i in ids if i not in by_id or not by_id[i].clinician_question]
    if missing:
        raise ValueError(f"program.question.demo_ids {missing} have no clinician question in {path}")
    return [
        dspy.Example(
            patient_narrative=by_id[i].patient_narrative,
            patient_question=" ".join(by_id[i].patient_question_phrases) or "(none)",
            clinician_question=by_id[i].clinician_question,
        ).with_inputs("patient_narrative", "patient_question")
        for i in ids
    ]


def build_program(program_cfg: DictConfig, role_lms: dict[str, dspy.LM] | None = None) -> ArchEHRCascade:
    program = ArchEHRCascade(
        question_max_words=program_cfg.question.max_words,
        strict_threshold=program_cfg.evidence.strict_threshold,
        lenient_threshold=program_cfg.evidence.lenient_threshold,
        fallback_count=program_cfg.evidence.fallback_count,
        answer_max_words=program_cfg.answer.max_words,
        soft_cut_ratio=program_cfg.answer.soft_cut_ratio,
        max_citations=program_cfg.alignment.max_citations,
        anchor=program_cfg.evidence.anchor,
        question_demos=load_question_demos(program_cfg.question.demos_path, list(program_cfg.question.demo_ids or [])),
        role_lms=role_lms,
        stages=dict(program_cfg.get("stages") or {}),
        fallback=program_cfg.get("fallback", "seed"),
        offline=OmegaConf.to_container(program_cfg.offline, resolve=True) if program_cfg.get("offline") else None,
    )
    if program_cfg.get("compiled"):
        from optimizers.compile import load_compiled

        load_compiled(program, program_cfg.compiled)
    return program


def record_from_prediction(pred: dspy.Prediction, seconds: float) -> dict[str, Any]:
    keys = ("case_id", "clinician_question", "evidence_ids", "scores", "selection", "answer", "alignment",
            "alignment_source", "dropped_ids", "fallbacks", "usage")
    record = {k: pred.get(k) for k in keys}
    record["seconds"] = round(seconds, 4)
    return record


def run_cases(program: ArchEHRCascade, cases: list[Case], log_file: PredictionLog, *, num_threads: int = 1,
              progress: bool = True) -> dict[str, dict[str, Any]]:
    """Run every case not yet in `log_file`; each record is appended as soon as its case finishes."""

    def one(case: Case) -> dict[str, Any]:
        start = time.perf_counter()
        return record_from_prediction(program(case=case), time.perf_counter() - start)

    return run_resumable(cases, lambda c: c.case_id, one, log_file, num_threads=num_threads, progress=progress,
                         unit="case")


def metrics_config(cfg: DictConfig) -> MetricsConfig:
    return MetricsConfig(bertscore=bertscore_config(cfg))


def score_all(records: dict[str, dict[str, Any]] | None, cases: list[Case], key_path: str | None,
              cfg: DictConfig, submissions: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Score the four subtasks that the available references allow; say which could not be scored."""
    if submissions is None:
        assert records is not None
        recs = list(records.values())
        with_note = [r for r in recs if r.get("answer") is not None]
        submissions = {
            1: {r["case_id"]: r["clinician_question"] for r in recs},
            2: {r["case_id"]: r["evidence_ids"] for r in with_note},
            3: {r["case_id"]: r["answer"] for r in with_note},
            4: {r["case_id"]: r["alignment"] for r in with_note},
        }
    mcfg = metrics_config(cfg)
    scores: dict[str, Any] = {}
    if any(c.clinician_question for c in cases):
        scores["subtask_1"] = score_subtask1(submissions[1], cases, mcfg)
    else:
        scores["subtask_1"] = {"unavailable": "the cases file has no <clinician_question> references"}
    if key_path:
        # Score the cases that were loaded (data.limit), like the official scripts' --case_ids_to_score.
        case_ids = {c.case_id for c in cases}
        key = {cid: kc for cid, kc in load_key(key_path).items() if cid in case_ids}
        scores["subtask_2"] = score_subtask2(submissions[2], key)
        scores["subtask_3"] = score_subtask3(submissions[3], key, cases, mcfg)
        generated = [r["case_id"] for r in (records or {}).values() if r.get("alignment_source") == "generated"]
        if not all(kc.answer_sentences for kc in key.values()):
            scores["subtask_4"] = {"unavailable": "the key has no clinician_answer_sentences with citations"}
        elif generated:
            scores["subtask_4"] = {"unavailable": f"cases {generated} aligned generated answer sentences; Subtask 4 "
                                   "aligns the reference <answer_sentences>, which the cases file must provide"}
        else:
            scores["subtask_4"] = score_subtask4(submissions[4], key)
    else:
        for st in (2, 3, 4):
            scores[f"subtask_{st}"] = {"unavailable": "no key file (data.key)"}
    bs = cfg.metrics.get("bertscore")
    scores["bertscore_model"] = {"model_type": bs.model_type, "num_layers": bs.num_layers,
                                 "rescaled": bs.rescale_with_baseline, "official": bs.official} if bs else None
    return scores


def usage_summary(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    stages: dict[str, dict[str, float]] = {}
    fallbacks: dict[str, int] = {}
    for rec in records.values():
        for stage, u in (rec.get("usage") or {}).items():
            agg = stages.setdefault(stage, {"seconds": 0.0, "lm_calls": 0, "input_tokens": 0, "output_tokens": 0})
            for k in agg:
                agg[k] += u.get(k, 0)
        for stage in rec.get("fallbacks") or {}:
            fallbacks[stage] = fallbacks.get(stage, 0) + 1
    n = max(len(records), 1)
    total_calls = sum(s["lm_calls"] for s in stages.values())
    return {
        "cases": len(records),
        "stages": stages,
        "lm_calls_total": total_calls,
        "lm_calls_per_case": total_calls / n,
        "seconds_per_case": sum(r.get("seconds", 0.0) for r in records.values()) / n,
        "fallbacks": fallbacks,
        # over the cases where the stage ran (a case without a note runs stage 1 only)
        "parse_success_rate": {s: 1 - fallbacks.get(s, 0) / runs for s in ROLES
                               if (runs := sum(1 for r in records.values() if s in (r.get("usage") or {})))},
        "dropped_ids": sum(r.get("dropped_ids") or 0 for r in records.values()),
        "note": "lm_calls counts calls that reached the model; DSPy cache hits report no usage and are not counted",
    }


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def report_markdown(cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
    stages = dict(cfg.program.get("stages") or {})
    lines = [f"# clinprog run: program={cfg.program.name}, lm={cfg.lm.client.model}, stages={stages}", "",
             f"- cases: {usage['cases']}", f"- LM calls per case: {usage['lm_calls_per_case']:.2f}",
             f"- seconds per case: {usage['seconds_per_case']:.2f}", f"- fallbacks: {usage['fallbacks'] or 'none'}",
             f"- unknown ids dropped: {usage['dropped_ids']}", "", "## Stages", "",
             "| stage | LM calls | input tokens | output tokens | seconds |", "|---|---|---|---|---|"]
    for name, s in usage["stages"].items():
        lines.append(f"| {name} | {s['lm_calls']} | {s['input_tokens']} | {s['output_tokens']} | {s['seconds']:.2f} |")
    if scores:
        lines += ["", "## Scores (official leaderboard scale, 0-100)", ""]
        for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
            s = scores.get(st) or {}
            if "overall_score" in s:
                missing = s.get("overall_missing")
                lines.append(f"- {st}: overall {_fmt(s['overall_score'])}"
                             + (f" (without {', '.join(missing)}: unavailable here)" if missing else ""))
            else:
                lines.append(f"- {st}: {s.get('unavailable', 'not scored')}")
        if scores.get("bertscore_model") and not scores["bertscore_model"]["official"]:
            lines.append(f"- BERTScore used {scores['bertscore_model']['model_type']}, not the official "
                         "distilbert-base-uncased: not comparable to the leaderboard.")
    return "\n".join(lines) + "\n"


def print_scores(scores: dict[str, Any]) -> None:
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        s = scores.get(st) or {}
        if "overall_score" not in s:
            print(f"{st}: {s.get('unavailable', 'not scored')}")
            continue
        flat = {k: v for k, v in s.items() if k not in ("unavailable", "overall_missing")}
        print(f"{st}: " + ", ".join(f"{k}={_fmt(v) if v is not None else 'n/a'}" for k, v in flat.items()))
        if s.get("overall_missing"):
            print(f"  unavailable here: {', '.join(s['overall_missing'])} (overall averages the rest)")


def _load(cfg: DictConfig) -> list[Case]:
    cases = load_cases(cfg.data.cases)
    if cfg.data.get("limit"):
        cases = cases[: int(cfg.data.limit)]
    return cases


def run(cfg: DictConfig) -> float | None:
    """task=run: predictions -> submissions -> (scores, when a key is given) -> usage and report."""
    cases = _load(cfg)
    out = output_dir()
    configure_dspy(cfg)
    lm_roles = [r for r in ROLES if (cfg.program.get("stages") or {}).get(r, "lm") == "lm"]
    # A missing key / dead server fails here, before any case; an all-offline program needs no LM at all.
    role_lms = build_role_lms(cfg.lm, lm_roles) if lm_roles else {}
    program = build_program(cfg.program, role_lms)
    records = run_cases(program, cases, PredictionLog(out / "predictions.jsonl"),
                        num_threads=int(cfg.lm.get("num_threads", 1)), progress=cfg.progress)
    write_submissions(list(records.values()), out)
    usage = usage_summary(records)
    write_json(out / "usage.json", usage)
    scores = None
    has_refs = cfg.data.get("key") or any(c.clinician_question for c in cases)
    if has_refs:
        scores = score_all(records, cases, cfg.data.get("key"), cfg)
        scores["objective"] = _objective(scores)
        write_json(out / "scores.json", scores)
        print_scores(scores)
    (out / "report.md").write_text(report_markdown(cfg, usage, scores), encoding="utf-8")
    write_json(out / "config.json", OmegaConf.to_container(cfg, resolve=True))
    print(f"outputs: {out}")
    return _objective(scores)


def evaluate(cfg: DictConfig) -> float | None:
    """task=evaluate: score `data.submissions` (a folder of official files) or a fresh run, and print."""
    if not cfg.data.get("submissions"):
        return run(cfg)
    cases = _load(cfg)
    folder = Path(cfg.data.submissions)
    subs = {st: read_submission(folder / name, st) for st, name in SUBMISSION_FILES.items()}
    scores = score_all(None, cases, cfg.data.get("key"), cfg, submissions=subs)
    scores["objective"] = _objective(scores)
    write_json(output_dir() / "scores.json", scores)
    print_scores(scores)
    return _objective(scores)


def _objective(scores: dict[str, Any] | None) -> float | None:
    """What a sweep optimizes: the mean of the available subtask overall scores."""
    if not scores:
        return None
    vals = [s["overall_score"] for s in scores.values() if isinstance(s, dict) and s.get("overall_score") is not None]
    return sum(vals) / len(vals) if vals else None


def examples(cases_path: str, key_path: str | None) -> list[dspy.Example]:
    """Cases as DSPy examples: the case is the input; the key and the reference question are for the metric."""
    cases = load_cases(cases_path)
    key = load_key(key_path) if key_path else {}
    return [dspy.Example(case=c, key=key.get(c.case_id), clinician_question=c.clinician_question).with_inputs("case")
            for c in cases]


def compile(cfg: DictConfig) -> float | None:  # noqa: A001 - the task's name
    """task=compile: optimize the cascade on data.train, score data.val before/after, save the compiled state."""
    from runners.compile import compile_program

    configure_dspy(cfg)
    # One LM for every role while compiling: optimizers deep-copy the program, which must not copy LM engines.
    dspy.configure(lm=build_role_lms(cfg.lm, ["question"])["question"])
    trainset = examples(cfg.data.train, cfg.data.get("train_key"))
    valset = examples(cfg.data.val, cfg.data.get("val_key"))
    return compile_program(cfg, build_program(cfg.program), trainset, valset)
