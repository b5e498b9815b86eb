"""report.html of a MEDIQA-CORR run: the metrics, then per note the flagged sentence with its correction as a word diff
(and the gold one when labelled) and the agent trace: steps with searches, reviews and decision, reflexions."""

from __future__ import annotations

from typing import Any

from common.html import bar_chart, echo, esc, filters, page, table, word_diff
from common.record_fields import entries, integer, mapping, number, seconds, text
from common.report_text import counts
from tasks.mediqa_corr.data import Note

KEYS = ("error_flag_accuracy", "error_sentence_accuracy", "R1FC", "R2FC", "RLFC", "BERTC", "BLEURTC", "AggregateC")


def _passages(passages: list[dict[str, Any]]) -> str:
    items = []
    for p in passages:
        source = f' <span class="muted">({echo(p["source"])})</span>' if p.get("source") else ""
        items.append(f"<li><code>{echo(p.get('id'))}</code> {echo(p.get('title') or '(untitled)')}{source}</li>")
    return f"<ol>{''.join(items)}</ol>" if items else ""


def _step(step: Any) -> str:
    if isinstance(step, str):  # records written before steps were structured: the text the agent read
        return f"<li><pre>{echo(step)}</pre></li>"
    if not isinstance(step, dict):  # a hand-edited record's odd entry
        return ""
    if not step.get("parsed", True):
        return f'<li><span class="warn">{echo(step.get("note"))}</span></li>'
    parts = [f"<strong>{echo(step.get('action'))}</strong>",
             f"<div><em>Observation:</em> {echo(step.get('observation'))}</div>",
             f"<div><em>Thought:</em> {echo(step.get('thought'))}</div>"]
    if step.get("action") == "search":
        passages = entries(step.get("passages"))
        parts.append(f"<div><em>Query:</em> <code>{echo(step.get('query'))}</code> "
                     f'<span class="muted">({len(passages)} passages)</span></div>{_passages(passages)}')
        if step.get("results"):
            parts.append(f"<details><summary>search results as the agent read them</summary>"
                         f"<pre>{echo(step['results'])}</pre></details>")
    elif step.get("action") == "final_mistake":
        parts.append(f"<div><em>Answer:</em> sentence {echo(step.get('sentence_id'))}: {echo(step.get('corrected'))}"
                     "</div>")
    if step.get("note"):
        parts.append(f'<div class="warn">{echo(step["note"])}</div>')
    return f"<li>{''.join(parts)}</li>"


def _proposal(proposal: Any) -> tuple[Any, Any]:
    """(sentence id, corrected sentence): a dict now, a [id, text] pair in records written before."""
    if isinstance(proposal, dict):
        return proposal.get("sentence_id"), proposal.get("corrected")
    pair = [*proposal, None, None] if isinstance(proposal, list) else [None, None]
    return pair[0], pair[1]


def _episode(n: int, ep: dict[str, Any]) -> str:
    steps = "".join(_step(s) for s in (ep.get("steps") if isinstance(ep.get("steps"), list) else []))
    parts = [f"<h4>Episode {n}</h4><ol>{steps}</ol>"]
    if ep.get("proposal"):
        sid, corrected = _proposal(ep["proposal"])
        parts.append(f"<p><strong>Proposal:</strong> sentence {echo(sid)}: {echo(corrected)}</p>")
    reviews = entries(ep.get("reviews"))
    if reviews:
        scores = [r.get("score") if r.get("score") is not None else 1 for r in reviews]  # unparsable counts as 1
        decision = "accepted" if ep.get("accepted") else "rejected"
        parts.append(table(["criterion", "score", "reasoning"],
                           [(r.get("criterion"), r.get("score") if r.get("score") is not None else "unparsable",
                             r.get("reasoning")) for r in reviews],
                           caption=f"MedEval: {decision} (scores {scores})"))
    if ep.get("unchanged") is True:
        parts.append("<p><strong>Not submitted:</strong> the correction repeats the sentence unchanged.</p>")
    if ep.get("no_error"):
        parts.append("<p><strong>Agent concluded: no error.</strong></p>")
    if ep.get("reflection"):
        parts.append(f"<p><strong>Reflexion:</strong> {echo(ep['reflection'])}</p>")
    return "".join(parts)


def readable(record: dict[str, Any]) -> dict[str, Any]:
    """The fields the report shows, typed: a hand-edited record's odd value (`"seconds": "abc"`) reads as missing."""
    flag = integer(record.get("flag"))
    counts = {k: integer(record.get(k)) for k in ("lm_calls", "react_steps", "searches", "parse_failures")}
    return {**record, "text_id": text(record.get("text_id")) or "?", "flag": flag if flag in (0, 1) else None,
            "sentence_id": integer(record.get("sentence_id")), "corrected": text(record.get("corrected")) or "",
            "outcome": text(record.get("outcome")), "line": text(record.get("line")),
            "seconds": number(record.get("seconds")), **counts,
            "repairs": record.get("repairs") if isinstance(record.get("repairs"), (dict, list, str)) else None,
            "episodes": entries(record.get("episodes"))}


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def note_section(note: Note, record: dict[str, Any]) -> str:
    labelled = note.has_labels
    wrong = labelled and (record["flag"] != note.error_flag
                          or (note.error_flag == 1 and record["sentence_id"] != note.error_sentence_id))
    flagged_id = str(record["sentence_id"]) if record["flag"] == 1 else None
    gold_id = str(note.error_sentence_id) if labelled and note.error_flag == 1 else None
    lines = []
    for sid, sentence in note.sentences:
        marks = []
        if sid == flagged_id:
            marks.append('<span class="tag warn">flagged by the program</span>')
        if sid == gold_id:
            marks.append('<span class="tag bad">gold error</span>')
        body = echo(sentence)
        if sid == flagged_id:
            body = f"<bdi>{word_diff(sentence, record['corrected'])}</bdi>"  # isolated like every echoed text
        style = ' style="background:#fff6d6"' if sid in (flagged_id, gold_id) else ""
        lines.append(f'<div class="sent"{style} id="n{esc(note.text_id)}-s{esc(sid)}"><span class="meta">[{echo(sid)}]'
                     f"</span>{''.join(marks)}{body}</div>")
    gold = ""
    if labelled:
        if note.error_flag == 1:
            gold = (f"<p><strong>Gold:</strong> sentence {note.error_sentence_id}: "
                    f"<bdi>{word_diff(note.error_sentence or '', (note.corrected_sentence or '').strip())}</bdi></p>")
        else:
            gold = "<p><strong>Gold:</strong> no error</p>"
    result = {0: "no error", 1: f"sentence {_count(record['sentence_id'])} corrected"}.get(record["flag"], "no flag")
    badges = [f'<span class="{"bad" if wrong else "good"}">{"disagrees with gold" if wrong else "agrees with gold"}'
              "</span>" if labelled else "",
              f'<span class="muted">{echo(record["outcome"])}</span>',
              f'<span class="muted">{seconds(record["seconds"], 1)}, {_count(record["lm_calls"])} LM calls, '
              f'{_count(record["react_steps"])} steps, {_count(record["searches"])} searches</span>',
              f'<span class="warn">markup stripped: {echo(record["repairs"])}</span>' if record.get("repairs") else ""]
    episodes = "".join(_episode(i, ep) for i, ep in enumerate(record["episodes"], 1))
    return (f'<section class="case" id="note-{esc(note.text_id)}" data-errors="{int(bool(wrong))}" '
            f'data-flagged="{int(record["flag"] == 1)}" data-fallbacks="{int((record["parse_failures"] or 0) > 0)}">'
            f'<h2>{echo(note.text_id)}: {echo(result)}</h2><div class="badges">{"".join(badges)}</div>'
            f'<p><code>{echo(record["line"])}</code></p>{gold}<div class="note">{"".join(lines)}</div>'
            f"<details><summary>Agent trace ({len(record['episodes'])} episodes)</summary>{episodes}"
            "</details></section>")


def render(cfg: Any, notes: list[Note], records: list[dict[str, Any]], usage: dict[str, Any],
           scores: dict[str, Any] | None) -> str:
    records = [readable(r) for r in records]
    by_id = {r["text_id"]: r for r in records}
    shown = [n for n in notes if n.text_id in by_id]
    metric_rows = [(k, scores.get(k)) for k in KEYS] if scores else []
    metrics = table(["metric", "value"], metric_rows) if scores else "<p>No scores: the notes are unlabelled.</p>"
    stages: dict[str, dict[str, float]] = {}
    for r in records:
        for stage, u in mapping(r.get("usage")).items():
            agg = stages.setdefault(str(stage), {"seconds": 0.0, "lm_calls": 0.0})
            agg["seconds"] += number(mapping(u).get("seconds")) or 0.0
            agg["lm_calls"] += number(mapping(u).get("lm_calls")) or 0.0
    charts = (bar_chart("seconds per agent (all notes)", [(k, v["seconds"]) for k, v in stages.items()], " s")
              + bar_chart("LM calls per agent", [(k, v["lm_calls"]) for k, v in stages.items()]))
    options = [("errors", "only disagreements with gold"), ("flagged", "only notes the program corrected"),
               ("fallbacks", "only notes with parse failures")]
    index = '<nav class="index" aria-label="note index">Notes: ' + " ".join(
        f'<a href="#note-{esc(n.text_id)}">{echo(n.text_id)}</a>' for n in shown) + "</nav>"
    per_note = {k: number(usage.get(k)) for k in ("lm_requests_per_note", "react_steps_per_note")}
    said = {k: "?" if v is None else f"{v:.1f}" for k, v in per_note.items()}
    body = (f"<h1>clinprog run: mediqa_corr</h1><p>{esc(usage.get('notes', 0))} notes; "
            f"{said['lm_requests_per_note']} LM requests, {said['react_steps_per_note']} ReAct "
            f"steps, {seconds(usage.get('seconds_per_note'), 1)} per note; "
            f"outcomes: {echo(counts(mapping(usage.get('outcomes'))))}; "
            f"degenerate outputs: {echo(counts(mapping(usage.get('degenerate'))))}</p>"
            f"<h2>Scores</h2>{metrics}<h2>Usage</h2>{charts}<h2>Notes</h2>{index}{filters(options)}"
            + "".join(note_section(n, by_id[n.text_id]) for n in shown))
    return page("clinprog mediqa_corr run", body)
