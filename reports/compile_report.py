"""compile_report.md and .html, both from the dict runners/compile.py saves as compile_report.json: the val metric
before and after, a train/val overlap warning, and each predictor's instruction (with the guard's verdict) and demos.
The .html's markup is in compile_report.html.j2 beside this file."""

from __future__ import annotations

from typing import Any

from common.html import render
from optimizers.instruction_guard import truncate

REJECTED_SHOWN = 600   # characters of a rejected instruction shown
DEMO_FIELD_SHOWN = 160


def score_rows(report: dict[str, Any]) -> list[tuple[str, float | None]]:
    scores = report["scores"]
    rows = [("before", scores["before"])]
    if scores.get("proposed") is not None:
        rows.append(("after, as the optimizer proposed it", scores["proposed"]))
    rows.append(("after" + (" (saved: rejected instructions put back)" if scores.get("proposed") is not None else ""),
                 scores["after"]))
    return rows


def fmt_score(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.4f}"


def guard_lines(report: dict[str, Any]) -> list[str]:
    """One line per predictor whose instruction changed: adopted or rejected and why."""
    out = []
    for p in report["predictors"]:
        if p["instruction_proposed"] == p["instruction_before"]:
            continue
        if p["adopted"]:
            out.append(f"{p['predictor']}: new instruction adopted")
        else:
            out.append(f"{p['predictor']}: proposed instruction REJECTED ({'; '.join(p['reasons'])}); "
                       "it keeps its original instruction")
    return out


def verdict_word(p: dict[str, Any]) -> str:
    """REJECTED, adopted, or what changed when the instruction did not (the demos may have)."""
    if not p["adopted"]:
        return "REJECTED"
    if p["verdict"] != "unchanged":
        return p["verdict"]
    before, after = len(p["demos_before"]), len(p["demos_after"])
    return "instruction unchanged" + (f", demos {before} -> {after}" if p["demos_before"] != p["demos_after"] else "")


def demo_text(demo: dict[str, str]) -> str:
    return "; ".join(f"{k}: {truncate(v, DEMO_FIELD_SHOWN)}" for k, v in demo.items())


# --- markdown -----------------------------------------------------------------------------------------------------
def quote(text: str) -> str:
    return "\n".join("> " + line for line in (text.strip() or "(empty)").splitlines())


def md_demos(title: str, demos: list[dict[str, str]]) -> list[str]:
    lines = [f"{title}: {len(demos)}"]
    lines += [f"  {i}. {demo_text(d)}" for i, d in enumerate(demos, 1)]
    return lines


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Compile: program={report['program']}, optimizer={report['optimizer']}", ""]
    if report.get("overlap_warning"):
        lines += [f"**{report['overlap_warning']}**", ""]
    lines += [f"## Scores: {report['metric']} on {report['val_size']} validation examples "
              f"({report['train_size']} training examples)", "", f"| | {report['metric']} |", "|---|---|"]
    lines += [f"| {name} | {fmt_score(value)} |" for name, value in score_rows(report)]
    guard = guard_lines(report)
    adoption = report.get("adoption") or {}
    if adoption.get("refused"):
        lines += ["", f"**Not adopted**: {adoption['refused']}"]
    review = report.get("learned_review")
    if review:
        lines += ["", "## Learned weights", ""] + [f"- {line}" for line in review["lines"]]
        lines += [f"- **not adopted**: {r}" for r in review["refused"]] or ["- adopted"]
    lines += ["", "## Instruction guard", ""] + ([f"- {g}" for g in guard] or ["- no instruction was changed"])
    lines += ["", "## Predictors"]
    for p in report["predictors"]:
        lines += ["", f"### {p['predictor']}: {verdict_word(p)}", ""]
        lines += [f"- rejected: {r}" for r in p["reasons"] if not p["adopted"]]
        lines += ["", "Instruction before:", "", quote(p["instruction_before"]), ""]
        if p["instruction_proposed"] != p["instruction_before"]:
            if p["adopted"]:
                lines += ["Instruction after (adopted):", "", quote(p["instruction_after"]), ""]
            else:
                lines += [f"Instruction proposed and rejected ({len(p['instruction_proposed'])} characters, "
                          f"shown truncated):", "", quote(truncate(p["instruction_proposed"], REJECTED_SHOWN)), "",
                          "Instruction after: the original, unchanged.", ""]
        else:
            lines += ["Instruction after: unchanged.", ""]
        lines += md_demos("Demos before", p["demos_before"]) + md_demos("Demos after", p["demos_after"])
    if any((report.get("curated_demos") or {}).values()):
        lines += ["", f"Curated demos kept from the config (outside the predictors): {report['curated_demos']}"]
    lines += ["", f"Saved: {report['saved']} (+ .meta.json)" if report["saved"] else "Saved: nothing (not adopted)", ""]
    return "\n".join(lines)


# --- html: the markup is in compile_report.html.j2 beside this file ----------------------------------------------
def html(report: dict[str, Any]) -> str:
    predictors = [{**p, "verdict_word": verdict_word(p), "changed": p["instruction_proposed"] != p["instruction_before"],
                   "proposed_shown": truncate(p["instruction_proposed"], REJECTED_SHOWN),
                   "demos_before": [demo_text(d) for d in p["demos_before"]],
                   "demos_after": [demo_text(d) for d in p["demos_after"]]} for p in report["predictors"]]
    curated = report.get("curated_demos") or {}
    return render("reports/compile_report.html.j2", report=report, predictors=predictors,
                  scores=[(name, fmt_score(v)) for name, v in score_rows(report)],
                  refused=(report.get("adoption") or {}).get("refused"), guard=guard_lines(report),
                  curated=curated if any(curated.values()) else None)
