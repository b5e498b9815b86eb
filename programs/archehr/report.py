"""What an ArchEHR run reports: usage per stage, report.md and the printed scores."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig

from common.config_groups import chosen_name
from common.report_text import counts
from common.submission_coverage import coverage_problem
from lms.describe import lm_model
from programs.archehr.grounding.verdicts import CONTRADICTED, NOT_IN_NOTE, flagged
from programs.archehr.pipeline import ROLES
from programs.archehr.stages import uses_lm


def usage_summary(records: list[dict[str, Any]], roles: tuple[str, ...]) -> dict[str, Any]:
    stages: dict[str, dict[str, float]] = {}
    for rec in records:
        for stage, u in (rec.get("usage") or {}).items():
            agg = stages.setdefault(stage, {"seconds": 0.0, "lm_calls": 0, "input_tokens": 0, "output_tokens": 0,
                                            "retries": 0})
            for k in agg:
                agg[k] += u.get(k, 0)
    fallbacks = dict(Counter(stage for rec in records for stage in rec.get("fallbacks") or {}))
    degenerate = dict(Counter(stage for rec in records if isinstance(rec.get("degenerate"), dict)
                              for stage in rec["degenerate"]))
    checked = [v for r in records for v in (r.get("grounding") or [])]
    verdicts = [v for v in checked if not v.get("refill")]  # the answer's own sentences, not refill's quotes
    n = max(len(records), 1)
    # per role, the cases where the stage ran (a case without a note runs stage 1 only)
    runs = {s: k for s in roles if (k := sum(1 for r in records if s in (r.get("usage") or {})))}
    total_calls = sum(s["lm_calls"] for s in stages.values())
    return {
        "cases": len(records),
        "stages": stages,
        "lm_calls_total": total_calls,
        "lm_calls_per_case": total_calls / n,
        "retries": sum(s["retries"] for s in stages.values()),
        "seconds_per_case": sum(r.get("seconds", 0.0) for r in records) / n,
        "fallbacks": fallbacks,
        "parse_success_rate": {s: 1 - fallbacks.get(s, 0) / k for s, k in runs.items()},
        # replies that parsed but said nothing, and texts word for word another case's (an LM ignoring its input)
        "degenerate": {**degenerate, **{f"{k}_repeated": n for k, n in repeated_outputs(records).items() if n}},
        "useful_rate": {s: 1 - (fallbacks.get(s, 0) + degenerate.get(s, 0)) / k for s, k in runs.items()},
        "dropped_ids": sum(r.get("dropped_ids") or 0 for r in records),
        "grounding": {"answer_sentences": len(verdicts),
                      "unsupported": sum(flagged(v) for v in verdicts),
                      "contradicted": sum(v["verdict"] == CONTRADICTED for v in verdicts),
                      "not_in_note": sum(v["verdict"] == NOT_IN_NOTE for v in verdicts),
                      "cases_with_unsupported": sum(any(flagged(v) for v in r.get("grounding") or [])
                                                    for r in records),
                      "refilled": len(checked) - len(verdicts)} if checked else None,
        "note": "lm_calls counts calls that reached the model; DSPy cache hits report no usage and are not counted",
    }


def repeated_outputs(records: list[dict[str, Any]]) -> dict[str, int]:
    """Per text field (clinician_question, answer), the cases whose text is word for word another case's, among
    cases with different inputs (a case run twice is not counted)."""
    out = {}
    for field in ("clinician_question", "answer"):
        seen: dict[str, set[str]] = {}
        for rec in records:
            text = rec.get(field)
            if isinstance(text, str) and text.strip():
                seen.setdefault(" ".join(text.split()).lower(), set()).add(str(rec.get("case_id")))
        out[field] = sum(len(ids) for ids in seen.values() if len(ids) > 1)
    return out


def _fmt(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def stage_implementations(cfg: DictConfig) -> list[tuple[str, str]]:
    """Each stage with what ran it: `lm (<model>)` or its non-LLM implementation."""
    out = []
    given_question = bool((cfg.program.get("module") or {}).get("use_given_question"))
    for stage in ROLES:
        node = cfg.program.get(stage)
        impl = chosen_name(cfg, f"program/archehr/{stage}", node)
        label = f"lm ({lm_model(cfg, stage)})" if uses_lm(get_class(node._target_)) else impl
        if stage == "question" and given_question:  # ArchEHR 2025: the case's clinician question (stage 1 skipped)
            label = f"given, else {label}"
        out.append((stage, label))
    grounding = cfg.program.get("grounding") or {}
    if grounding.get("_target_"):
        judge = grounding.get("judge")
        out.append(("grounding", f"lm judge ({lm_model(cfg, 'grounding')})" if judge == "lm" else "non-LLM checks"))
    return out


def describe_stages(cfg: DictConfig) -> str:
    parts = stage_implementations(cfg)
    uses_lm = any(impl.startswith("lm") for _, impl in parts)
    return ", ".join(f"{stage}={impl}" for stage, impl in parts) + ("" if uses_lm else "; no LM")


def report_markdown(cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None,
                    scored_below: bool = False) -> str:
    repairs = (usage.get("repairs") or {}).get("stages") or {}
    lines = [f"# clinprog run: program={cfg.program.name}", "", f"- stages: {describe_stages(cfg)}",
             f"- cases: {usage['cases']}", f"- LM calls per case: {usage['lm_calls_per_case']:.2f}",
             f"- seconds per case: {usage['seconds_per_case']:.2f}", f"- fallbacks: {counts(usage['fallbacks'])}",
             f"- degenerate outputs (parsed, said nothing): {counts(usage.get('degenerate') or {})}",
             f"- unknown ids dropped: {usage['dropped_ids']}",
             f"- markup stripped from LM outputs (repairs): {counts(repairs)}",
             "- grounding: " + (f"{usage['grounding']['unsupported']} of {usage['grounding']['answer_sentences']} answer "
                                f"sentences flagged ({usage['grounding'].get('contradicted', 0)} contradicted, "
                                f"{usage['grounding'].get('not_in_note', 0)} not in the note; "
                                f"{usage['grounding']['cases_with_unsupported']} cases"
                                + (f"; {usage['grounding']['refilled']} quoted from the note in their place (refill)"
                                   if usage["grounding"].get("refilled") else "") + ")"
                                if usage.get("grounding") else "off"), "", "## Stages", "",
             "| stage | LM calls | input tokens | output tokens | seconds |", "|---|---|---|---|---|"]
    for name, s in usage["stages"].items():
        lines.append(f"| {name} | {s['lm_calls']} | {s['input_tokens']} | {s['output_tokens']} | {s['seconds']:.2f} |")
    if scores is None and not scored_below:
        lines += ["", "No scores: these cases have no key and no reference clinician questions."]
    if scores:
        lines += ["", "## Scores (official leaderboard scale, 0-100)", ""]
        for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
            s = scores.get(st) or {}
            if "overall_score" in s:
                missing = s.get("overall_missing")
                lines.append(f"- {st}: overall {_fmt(s['overall_score'])}"
                             + (f" (without {', '.join(missing)}: unavailable here)" if missing else ""))
            elif "invalid" in s:
                lines.append(f"- {st}: invalid submission: {s['invalid']}")
            else:
                lines.append(f"- {st}: {s.get('unavailable', 'not scored')}")
        if scores.get("bertscore_model") and not scores["bertscore_model"]["official"]:
            lines.append(f"- BERTScore used {scores['bertscore_model']['model_type']}, not the official "
                         "distilbert-base-uncased: not comparable to the leaderboard.")
    return "\n".join(lines) + "\n"


MISSING_RULE = {False: "a subtask file missing cases is rejected, as the official scripts do; "
                       "data.score_only_submitted=true scores only the submitted cases, data.limit=N the first N",
                True: "not scored (data.score_only_submitted=true)"}
EXTRA_RULE = "case ids not in the cases file, rejected as the official scripts do"


def print_scores(scores: dict[str, Any]) -> None:
    cov = scores.get("coverage")
    line = coverage_problem(cov, "cases", MISSING_RULE[cov["only_submitted"]], EXTRA_RULE) if cov else None
    if line:
        print(line)
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        s = scores.get(st) or {}
        if "invalid" in s:
            print(f"{st}: invalid submission, not scored: {s['invalid']}")
            continue
        if "overall_score" not in s:
            print(f"{st}: {s.get('unavailable', 'not scored')}")
            continue
        flat = {k: v for k, v in s.items() if k not in ("unavailable", "overall_missing", "notes")}
        print(f"{st}: " + ", ".join(f"{k}={_fmt(v) if v is not None else 'n/a'}" for k, v in flat.items()))
        if s.get("overall_missing"):
            print(f"  unavailable here: {', '.join(s['overall_missing'])} (overall averages the rest)")
        for note in s.get("notes") or []:  # where clinprog and the official script part (tasks/archehr/scoring.py)
            print(f"  note: {note}")
    if scores.get("caveat"):  # the bundled cases the shipped state was tuned on (programs/archehr/fitted_on.py)
        print(f"note: {scores['caveat']}")
