"""report.html of a MEDIQA-CORR run: the metrics, then per note the flagged sentence with its correction as a word diff
(and the gold one when labelled) and the agent trace: steps with searches, reviews and decision, reflexions.
The markup is in report.html.j2 beside this file; here, what it shows: the records' fields typed, rows and counts."""

from __future__ import annotations

from typing import Any

from common.html import render as render_page
from common.record_fields import entries, integer, mapping, number, seconds, text
from tasks.mediqa_corr.data import Note

KEYS = ("error_flag_accuracy", "error_sentence_accuracy", "R1FC", "R2FC", "RLFC", "BERTC", "BLEURTC", "AggregateC")


def _proposal(proposal: Any) -> tuple[Any, Any]:
    """(sentence id, corrected sentence): a dict now, a [id, text] pair in records written before."""
    if isinstance(proposal, dict):
        return proposal.get("sentence_id"), proposal.get("corrected")
    pair = [*proposal, None, None] if isinstance(proposal, list) else [None, None]
    return pair[0], pair[1]


def episode(ep: dict[str, Any]) -> dict[str, Any]:
    """One episode of the trace: its steps as recorded (a dict; text in records written before; anything else in a
    hand-edited one), proposal, MedEval reviews and reflexion."""
    reviews = entries(ep.get("reviews"))
    return {"steps": [{**s, "passages": entries(s.get("passages"))} if isinstance(s, dict) else s
                      for s in (ep.get("steps") if isinstance(ep.get("steps"), list) else [])],
            "proposal": _proposal(ep["proposal"]) if ep.get("proposal") else None,
            "reviews": [(r.get("criterion"), r.get("score") if r.get("score") is not None else "unparsable",
                         r.get("reasoning")) for r in reviews],
            "scores": [r.get("score") if r.get("score") is not None else 1 for r in reviews],  # unparsable counts as 1
            "accepted": bool(ep.get("accepted")), "no_error": ep.get("no_error"), "reflection": ep.get("reflection")}


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


def note_view(note: Note, record: dict[str, Any]) -> dict[str, Any]:
    """One note's section: agrees with gold or not, the flagged and gold sentences, the counts and the episodes."""
    labelled = note.has_labels
    wrong = labelled and (record["flag"] != note.error_flag
                          or (note.error_flag == 1 and record["sentence_id"] != note.error_sentence_id))
    flagged_id = str(record["sentence_id"]) if record["flag"] == 1 else None
    gold_id = str(note.error_sentence_id) if labelled and note.error_flag == 1 else None
    said = {k: "?" if record[k] is None else str(record[k])
            for k in ("sentence_id", "lm_calls", "react_steps", "searches")}
    return {"note": note, "record": record, "labelled": labelled, "wrong": bool(wrong), "said": said,
            "seconds": seconds(record["seconds"], 1), "episodes": [episode(ep) for ep in record["episodes"]],
            "sentences": [{"id": sid, "text": sentence, "flagged": sid == flagged_id, "gold": sid == gold_id}
                          for sid, sentence in note.sentences]}


def render(cfg: Any, notes: list[Note], records: list[dict[str, Any]], usage: dict[str, Any],
           scores: dict[str, Any] | None) -> str:
    records = [readable(r) for r in records]
    by_id = {r["text_id"]: r for r in records}
    stages: dict[str, dict[str, float]] = {}
    for r in records:
        for stage, u in mapping(r.get("usage")).items():
            agg = stages.setdefault(str(stage), {"seconds": 0.0, "lm_calls": 0.0})
            agg["seconds"] += number(mapping(u).get("seconds")) or 0.0
            agg["lm_calls"] += number(mapping(u).get("lm_calls")) or 0.0
    per_note = {k: number(usage.get(k)) for k in ("lm_requests_per_note", "react_steps_per_note")}
    return render_page(
        "programs/mediqa_corr/report.html.j2", usage=usage, seconds=seconds(usage.get("seconds_per_note"), 1),
        per_note={k: "?" if v is None else f"{v:.1f}" for k, v in per_note.items()},
        metrics=[(k, scores.get(k)) for k in KEYS] if scores else None,
        charts={"seconds": [(k, v["seconds"]) for k, v in stages.items()],
                "calls": [(k, v["lm_calls"]) for k, v in stages.items()]},
        notes=[note_view(n, by_id[n.text_id]) for n in notes if n.text_id in by_id])
