"""compile_report.md and .html, both from the dict runners/compile.py saves as compile_report.json: the val metric
before and after, a train/val overlap warning, and each predictor's instruction (with the guard's verdict) and demos."""

from __future__ import annotations

from typing import Any

from common.html import esc, json_block, page, table, word_diff
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


# --- html ---------------------------------------------------------------------------------------------------------
def html_demos(title: str, demos: list[dict[str, str]]) -> str:
    items = "".join(f"<li>{esc(demo_text(d))}</li>" for d in demos)
    return f"<h4>{esc(title)}: {len(demos)}</h4>" + (f"<ol>{items}</ol>" if items else "")


def html_predictor(p: dict[str, Any]) -> str:
    changed = p["instruction_proposed"] != p["instruction_before"]
    mark = "good" if p["adopted"] else "bad"
    head = f'<h3>{esc(p["predictor"])} <span class="tag {mark}">{esc(verdict_word(p))}</span></h3>'
    if not p["adopted"]:
        head += '<ul class="bad">' + "".join(f"<li>{esc(r)}</li>" for r in p["reasons"]) + "</ul>"
    before = f"<h4>Instruction before</h4><pre>{esc(p['instruction_before'])}</pre>"
    if not changed:
        after = "<h4>Instruction after</h4><p class=muted>unchanged</p>"
    elif p["adopted"]:
        after = (f"<h4>Instruction after (adopted)</h4><pre>{esc(p['instruction_after'])}</pre>"
                 f"<details><summary>word changes</summary><p>{word_diff(p['instruction_before'], p['instruction_after'])}"
                 "</p></details>")
    else:
        after = (f'<h4 class="bad">Instruction proposed and rejected ({len(p["instruction_proposed"])} characters, '
                 f'shown truncated)</h4><pre class="unsupported">'
                 f'{esc(truncate(p["instruction_proposed"], REJECTED_SHOWN))}</pre>'
                 "<p>Instruction after: the original, unchanged.</p>")
    demos = f'<div class="grid"><div>{html_demos("Demos before", p["demos_before"])}</div>' \
            f'<div>{html_demos("Demos after", p["demos_after"])}</div></div>'
    return f'<section class="case">{head}{before}{after}{demos}</section>'


def html(report: dict[str, Any]) -> str:
    warning = f'<p class="warn"><strong>{esc(report["overlap_warning"])}</strong></p>' \
        if report.get("overlap_warning") else ""
    guard = guard_lines(report) or ["no instruction was changed"]
    curated = report.get("curated_demos") or {}
    refused = (report.get("adoption") or {}).get("refused")
    body = (f"<h1>Compile: program={esc(report['program'])}, optimizer={esc(report['optimizer'])}</h1>{warning}"
            + table(["", report["metric"]], [(name, fmt_score(v)) for name, v in score_rows(report)],
                    caption=f"{report['val_size']} validation examples, {report['train_size']} training examples")
            + (f'<p class="bad"><strong>Not adopted</strong>: {esc(refused)}</p>' if refused else "")
            + "<h2>Instruction guard</h2><ul>" + "".join(f"<li>{esc(g)}</li>" for g in guard) + "</ul>"
            + "<h2>Predictors</h2>" + "".join(html_predictor(p) for p in report["predictors"])
            + (f"<p>Curated demos kept from the config (outside the predictors): {esc(curated)}</p>"
               if any(curated.values()) else "")
            + f"<h2>Saved</h2><p>{esc(report['saved'] or 'nothing (not adopted)')}</p>"
            + json_block(report.get("optimizer_config")))
    return page(f"clinprog compile {report['program']}", body, script="")
