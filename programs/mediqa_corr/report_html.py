"""report.html of a MEDIQA-CORR run: summary metrics, and per note the flagged sentence with the correction as a
word diff (and the gold one when labelled), then the agent trace: ReAct steps with searches, the MedEval reviews
with the accept/reject decision, reflexions; seconds and LM calls."""

from __future__ import annotations

from typing import Any

from common.html import bar_chart, esc, filters, page, table, word_diff
from tasks.mediqa_corr.data import Note

KEYS = ("error_flag_accuracy", "error_sentence_accuracy", "R1FC", "R2FC", "RLFC", "BERTC", "BLEURTC", "AggregateC")


def _passages(passages: list[dict[str, Any]]) -> str:
    items = []
    for p in passages:
        source = f' <span class="muted">({esc(p["source"])})</span>' if p.get("source") else ""
        items.append(f"<li><code>{esc(p.get('id'))}</code> {esc(p.get('title') or '(untitled)')}{source}</li>")
    return f"<ol>{''.join(items)}</ol>" if items else ""


def _step(step: str | dict[str, Any]) -> str:
    if isinstance(step, str):  # records written before steps were structured: the text the agent read
        return f"<li><pre>{esc(step)}</pre></li>"
    if not step.get("parsed", True):
        return f'<li><span class="warn">{esc(step.get("note"))}</span></li>'
    parts = [f"<strong>{esc(step.get('action'))}</strong>",
             f"<div><em>Observation:</em> {esc(step.get('observation'))}</div>",
             f"<div><em>Thought:</em> {esc(step.get('thought'))}</div>"]
    if step.get("action") == "search":
        passages = step.get("passages") or []
        parts.append(f"<div><em>Query:</em> <code>{esc(step.get('query'))}</code> "
                     f'<span class="muted">({len(passages)} passages)</span></div>{_passages(passages)}')
        if step.get("results"):
            parts.append(f"<details><summary>search results as the agent read them</summary>"
                         f"<pre>{esc(step['results'])}</pre></details>")
    elif step.get("action") == "final_mistake":
        parts.append(f"<div><em>Answer:</em> sentence {esc(step.get('sentence_id'))}: {esc(step.get('corrected'))}"
                     "</div>")
    if step.get("note"):
        parts.append(f'<div class="warn">{esc(step["note"])}</div>')
    return f"<li>{''.join(parts)}</li>"


def _proposal(proposal: list[Any] | dict[str, Any]) -> tuple[Any, Any]:
    """(sentence id, corrected sentence): a dict now, a [id, text] pair in records written before."""
    if isinstance(proposal, dict):
        return proposal.get("sentence_id"), proposal.get("corrected")
    return proposal[0], proposal[1]


def _episode(n: int, ep: dict[str, Any]) -> str:
    steps = "".join(_step(s) for s in ep.get("steps") or [])
    parts = [f"<h4>Episode {n}</h4><ol>{steps}</ol>"]
    if ep.get("proposal"):
        sid, text = _proposal(ep["proposal"])
        parts.append(f"<p><strong>Proposal:</strong> sentence {esc(sid)}: {esc(text)}</p>")
    if ep.get("reviews"):
        scores = [r["score"] for r in ep["reviews"]]
        decision = "accepted" if ep.get("accepted") else "rejected"
        parts.append(table(["criterion", "score", "reasoning"],
                           [(r["criterion"], r["score"] if r["score"] is not None else "unparsable", r["reasoning"])
                            for r in ep["reviews"]],
                           caption=f"MedEval: {decision} (scores {scores})"))
    if ep.get("no_error"):
        parts.append("<p><strong>Agent concluded: no error.</strong></p>")
    if ep.get("reflection"):
        parts.append(f"<p><strong>Reflexion:</strong> {esc(ep['reflection'])}</p>")
    return "".join(parts)


def note_section(note: Note, record: dict[str, Any]) -> str:
    labelled = note.has_labels
    wrong = labelled and (record["flag"] != note.error_flag
                          or (note.error_flag == 1 and record["sentence_id"] != note.error_sentence_id))
    flagged_id = str(record["sentence_id"]) if record["flag"] == 1 else None
    gold_id = str(note.error_sentence_id) if labelled and note.error_flag == 1 else None
    lines = []
    for sid, text in note.sentences:
        marks = []
        if sid == flagged_id:
            marks.append('<span class="tag warn">flagged by the program</span>')
        if sid == gold_id:
            marks.append('<span class="tag bad">gold error</span>')
        body = esc(text)
        if sid == flagged_id:
            body = f"{word_diff(text, record['corrected'])}"
        style = ' style="background:#fff6d6"' if sid in (flagged_id, gold_id) else ""
        lines.append(f'<div class="sent"{style} id="n{esc(note.text_id)}-s{esc(sid)}"><span class="meta">[{esc(sid)}]'
                     f"</span>{''.join(marks)}{body}</div>")
    gold = ""
    if labelled:
        if note.error_flag == 1:
            gold = (f"<p><strong>Gold:</strong> sentence {note.error_sentence_id}: "
                    f"{word_diff(note.error_sentence or '', (note.corrected_sentence or '').strip())}</p>")
        else:
            gold = "<p><strong>Gold:</strong> no error</p>"
    result = ("no error" if record["flag"] == 0 else f"sentence {record['sentence_id']} corrected")
    badges = [f'<span class="{"bad" if wrong else "good"}">{"disagrees with gold" if wrong else "agrees with gold"}'
              "</span>" if labelled else "",
              f'<span class="muted">{esc(record["outcome"])}</span>',
              f'<span class="muted">{record["seconds"]:.1f} s, {record["lm_calls"]} LM calls, '
              f'{record["react_steps"]} steps, {record["searches"]} searches</span>',
              f'<span class="warn">markup stripped: {esc(record["repairs"])}</span>' if record.get("repairs") else ""]
    episodes = "".join(_episode(i, ep) for i, ep in enumerate(record.get("episodes") or [], 1))
    return (f'<section class="case" id="note-{esc(note.text_id)}" data-errors="{int(bool(wrong))}" '
            f'data-flagged="{int(record["flag"] == 1)}" data-fallbacks="{int(record["parse_failures"] > 0)}">'
            f'<h2>{esc(note.text_id)}: {esc(result)}</h2><div class="badges">{"".join(badges)}</div>'
            f'<p><code>{esc(record["line"])}</code></p>{gold}<div class="note">{"".join(lines)}</div>'
            f"<details><summary>Agent trace ({len(record.get('episodes') or [])} episodes)</summary>{episodes}"
            "</details></section>")


def render(cfg: Any, notes: list[Note], records: list[dict[str, Any]], usage: dict[str, Any],
           scores: dict[str, Any] | None) -> str:
    by_id = {r["text_id"]: r for r in records}
    shown = [n for n in notes if n.text_id in by_id]
    metric_rows = [(k, scores.get(k)) for k in KEYS] if scores else []
    metrics = table(["metric", "value"], metric_rows) if scores else "<p>No scores: the notes are unlabelled.</p>"
    stages: dict[str, dict[str, float]] = {}
    for r in records:
        for stage, u in (r.get("usage") or {}).items():
            agg = stages.setdefault(stage, {"seconds": 0.0, "lm_calls": 0.0})
            agg["seconds"] += u.get("seconds", 0.0)
            agg["lm_calls"] += u.get("lm_calls", 0)
    charts = (bar_chart("seconds per agent (all notes)", [(k, v["seconds"]) for k, v in stages.items()], " s")
              + bar_chart("LM calls per agent", [(k, v["lm_calls"]) for k, v in stages.items()]))
    options = [("errors", "only disagreements with gold"), ("flagged", "only notes the program corrected"),
               ("fallbacks", "only notes with parse failures")]
    index = '<nav class="index" aria-label="note index">Notes: ' + " ".join(
        f'<a href="#note-{esc(n.text_id)}">{esc(n.text_id)}</a>' for n in shown) + "</nav>"
    body = (f"<h1>clinprog run: mediqa_corr</h1><p>{usage.get('notes', 0)} notes; "
            f"{usage.get('lm_requests_per_note', 0):.1f} LM requests, {usage.get('react_steps_per_note', 0):.1f} ReAct "
            f"steps, {usage.get('seconds_per_note', 0):.1f} s per note; outcomes {esc(usage.get('outcomes'))}</p>"
            f"<h2>Scores</h2>{metrics}<h2>Usage</h2>{charts}<h2>Notes</h2>{index}{filters(options)}"
            + "".join(note_section(n, by_id[n.text_id]) for n in shown))
    return page("clinprog mediqa_corr run", body)
