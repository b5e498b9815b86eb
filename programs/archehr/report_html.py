"""report.html of an ArchEHR run: scores (with trivial baselines given a key), usage per stage, and each case's
narrative, questions, note shaded by evidence score with gold labels, and answer with citations and grounding flags.
The markup is in report.html.j2 beside this file; here, what it shows: the records' fields typed, rows and counts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from common.html import render as render_page
from common.record_fields import entries, integer, mapping, number, seconds, text, texts
from programs.archehr.grounding.verdicts import flagged
from programs.archehr.question.text import first_person, opening
from programs.archehr.report import describe_stages
from tasks.archehr.data import Case, KeyCase
from tasks.archehr.scoring import score_subtask2

SHADE = {1: "#ffffff", 2: "#eef4fb", 3: "#d9e8f7", 4: "#b9d4f1", 5: "#92bdea"}
GOLD_CLASS = {"TP": "good", "FP": "bad", "FN": "bad"}


def readable(record: dict[str, Any]) -> dict[str, Any]:
    """The fields the report shows, typed: a hand-edited record's odd value (`"seconds": "abc"`, ids not a list)
    reads as missing, so `task=report` still writes the page."""
    verdicts = [{**v, "answer_id": text(v.get("answer_id")) or "?", "text": text(v.get("text")) or "",
                 "verdict": text(v.get("verdict")), "reasons": texts(v.get("reasons")),
                 "support_ids": texts(v.get("support_ids")), "refill": v.get("refill") is True}
                for v in entries(record.get("grounding"))]
    return {**record, "case_id": text(record.get("case_id")) or "?",
            "clinician_question": text(record.get("clinician_question")), "answer": text(record.get("answer")),
            "selection": text(record.get("selection")), "seconds": number(record.get("seconds")),
            "alignment_source": text(record.get("alignment_source")),
            "evidence_ids": texts(record.get("evidence_ids")),
            "scores": {str(k): n for k, v in mapping(record.get("scores")).items() if (n := integer(v)) is not None},
            "fallbacks": {str(k): v for k, v in mapping(record.get("fallbacks")).items()},
            "degenerate": {str(k): v for k, v in mapping(record.get("degenerate")).items()},
            "grounding": verdicts if isinstance(record.get("grounding"), list) else None,
            "alignment": [{"answer_id": text(a.get("answer_id")) or "?", "evidence_id": texts(a.get("evidence_id"))}
                          for a in entries(record.get("alignment"))],
            "answer_sentences": [{"id": text(a.get("id")) or "?", "text": text(a.get("text")) or ""}
                                 for a in entries(record.get("answer_sentences"))]}


def narrative(case: Case) -> list[tuple[str, str]]:
    """The patient narrative as ("text", words), ("mark", "") and ("end", "") pieces: each patient question phrase,
    longest first, marked where it first appears whole inside or outside each phrase marked before (not across one's
    edge: a shorter phrase inside a longer one is marked within it)."""
    told, spans = case.patient_narrative, list[tuple[int, int]]()

    def fits(start: int, end: int) -> bool:  # inside or outside each phrase marked before, not across its edge
        return all(end <= b or e <= start or (b <= start and end <= e) for b, e in spans)

    for phrase in sorted(case.patient_question_phrases, key=len, reverse=True):
        start = told.find(phrase) if phrase else -1
        while start >= 0 and not fits(start, start + len(phrase)):
            start = told.find(phrase, start + 1)
        if start >= 0:
            spans.append((start, start + len(phrase)))
    # at one place: ends before marks, the inner phrase's end first, the outer phrase's mark first
    pieces, at = list[tuple[str, str]](), 0
    for place, opens, _ in sorted([(b, 1, b - e) for b, e in spans] + [(e, 0, e - b) for b, e in spans]):
        pieces += [("text", told[at:place]), ("mark" if opens else "end", "")]
        at = place
    return [*pieces, ("text", told[at:])]


def note(case: Case, record: dict[str, Any], key: KeyCase | None) -> list[dict[str, Any]]:
    """Each note sentence with its evidence score, whether the run selected it and, given a key, its gold label."""
    scores, selected = record.get("scores") or {}, set(record.get("evidence_ids") or [])
    rows: list[dict[str, Any]] = []
    for s in case.sentences:
        score, chosen = scores.get(s.id), s.id in selected
        label = key.relevance.get(s.id, "not-relevant") if key is not None else None
        essential = label == "essential"
        mark = "TP" if chosen and essential else "FP" if chosen else "FN" if essential else ""
        rows.append({"id": s.id, "text": s.text, "score": score, "chosen": chosen, "shade": SHADE.get(score, "#ffffff"),
                     "label": label, "mark": mark, "label_class": GOLD_CLASS.get(mark, "muted")})
    return rows


def answer(case: Case, record: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The answer's sentences with the note sentences each cites and its grounding verdict; None: Subtask 1 only."""
    if record.get("answer") is None:
        return None
    verdicts = {v["answer_id"]: v for v in record.get("grounding") or []}
    links = {a["answer_id"]: a["evidence_id"] for a in record.get("alignment") or []}
    own = record.get("alignment_source") == "generated"
    sentences = (record.get("answer_sentences") or []) if own else []
    if not sentences:  # the alignment was of reference sentences: show our answer, checked sentence by sentence
        sentences = [{"id": v["answer_id"], "text": v["text"]} for v in verdicts.values()] or \
            [{"id": "1", "text": record["answer"]}]
    # an extractive answer quotes note sentences: without verdicts, each quoted sentence cites its source
    quoted = {sent.text.strip(): sent.id for sent in case.sentences}
    shown: list[dict[str, Any]] = []
    for a in sentences:
        v = verdicts.get(a["id"])
        ids = links.get(a["id"], []) if own else (v or {}).get("support_ids", [])
        if not own and v is None:
            ids = [sid for t, sid in quoted.items() if t and t in a["text"]]
        shown.append({"text": a["text"], "cites": ids, "verdict": v, "flagged": bool(v) and flagged(v),
                      "refill": bool(v and v.get("refill")),
                      "unavailable": mapping((v or {}).get("judge")).get("unavailable")})
    return shown


def candidates(record: dict[str, Any]) -> dict[str, Any] | None:
    """The questions the learned stage weighed, the pick first, with the rerank's parts (none from an LM stage)."""
    rows = record.get("question_candidates")
    if not isinstance(rows, list) or not rows:
        return None
    rows = [r for r in rows if isinstance(r, dict)]
    # the first row is the pick when eligible and the record's question (else the stage fell back)
    picked = bool(rows) and bool(rows[0].get("eligible")) and rows[0].get("question") == record.get("clinician_question")
    body = [[row.get("question"), row.get("score"), row.get("log_prob"), row.get("coverage"), row.get("opening_share"),
             "picked" if picked and n == 0 else ("" if row.get("eligible") else f"excluded: {row.get('excluded')}")]
            for n, row in enumerate(rows)]
    summary = f"{len(body)} candidate question{'s' if len(body) != 1 else ''} the stage weighed" + (
        "" if picked else "; none picked: the question above is the message's own first question sentence")
    return {"summary": summary, "rows": body}


def case_view(case: Case, record: dict[str, Any], key: KeyCase | None) -> dict[str, Any]:
    """One case's section: its badges' counts, narrative, candidates, answer and note."""
    own = record.get("alignment_source") == "generated"
    return {"case": case, "record": record, "keyed": key is not None,
            "errors": len(set(record["evidence_ids"]) ^ key.essential) if key is not None else 0,
            "unsupported": sum(flagged(v) for v in record["grounding"] or []),
            "degenerate": [f"{k}: {v}" for k, v in record["degenerate"].items()], "seconds": seconds(record["seconds"]),
            "narrative": narrative(case), "candidates": candidates(record), "answer": answer(case, record),
            "reference_alignment": [] if own else record.get("alignment") or [], "note": note(case, record, key)}


def score_rows(scores: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    rows = []
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        s = mapping(scores.get(st))
        if "overall_score" in s:
            rows.append((st, s["overall_score"], ", ".join(f"{k} {v:.2f}" for k, v in s.items()
                                                         if isinstance(v, float) and k != "overall_score")))
        else:
            rows.append((st, None, s.get("invalid") or s.get("unavailable") or "not scored"))
    return rows


def baselines(scores: dict[str, Any], cases: list[Case], key: dict[str, KeyCase] | None) -> list[tuple[str, Any]]:
    """Subtask 2 of this run against trivial baselines on the same cases; none without a key."""
    if not key:
        return []
    with_note = [c for c in cases if c.sentences and c.case_id in key]
    trivial = {"all sentences": {c.case_id: [s.id for s in c.sentences] for c in with_note},
               "first 3 sentences": {c.case_id: [s.id for s in c.sentences[:3]] for c in with_note}}
    sub_key = {c.case_id: key[c.case_id] for c in with_note}
    return [("this run", (scores.get("subtask_2") or {}).get("strict_micro_f1"))] + [
        (name, score_subtask2(pred, sub_key)["strict_micro_f1"]) for name, pred in trivial.items()]


def question_form(records: list[dict[str, Any]], max_words: int) -> list[tuple[str, Any]]:
    """The form of the run's clinician questions, no reference needed: one opening on over 30% of them is a template,
    the first person is the writer's voice, not a clinician's."""
    questions = [q for r in records if isinstance(q := r.get("clinician_question"), str) and q]
    if not questions:
        return []
    top, top_n = Counter(opening(q) for q in questions).most_common(1)[0]
    fell_back = sum(1 for r in records if "question" in (r.get("fallbacks") or {}))
    ranked = reranked = 0  # records whose pick (first) is a candidate; of them, picked over a more probable one
    for rows in (r.get("question_candidates") for r in records):
        pick = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
        if not pick.get("eligible") or not isinstance(pick.get("log_prob"), (int, float)):
            continue  # the stage fell back, or a hand-edited file's odd entry: not counted, not a traceback
        ranked += 1
        reranked += any(isinstance(c, dict) and isinstance(c.get("log_prob"), (int, float))
                        and c["log_prob"] > pick["log_prob"] for c in rows)
    n = len(questions)
    common = f"'{top}': {top_n} ({top_n / n:.0%})" if top_n > 1 else "none repeats"
    rows = [("questions", n), ("most common 4-word opening", common),
            ("in the first person (I, my, me)", sum(first_person(q) for q in questions)),
            (f"over {max_words} words", sum(len(q.split()) > max_words for q in questions)),
            ("without a final '?'", sum(not q.rstrip().endswith("?") for q in questions)),
            ("the stage's fallback answered", fell_back)]
    if ranked:
        rows.append(("the rerank picked another than the most probable candidate", f"{reranked} of {ranked}"))
    return rows


def render(cfg: Any, cases: list[Case], key: dict[str, KeyCase] | None, records: list[dict[str, Any]],
           usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
    records = [readable(r) for r in records]
    by_id = {r["case_id"]: r for r in records}
    # usage.json read as typed as the records
    stages = {str(k): {f: number(mapping(v).get(f)) or 0.0 for f in ("lm_calls", "input_tokens", "output_tokens",
                                                                       "seconds")}
              for k, v in mapping(usage.get("stages")).items()}
    per_case = number(usage.get("lm_calls_per_case"))
    run = {"seconds": seconds(usage.get("seconds_per_case")), "calls": "?" if per_case is None else f"{per_case:.2f}",
           "grounding": mapping(usage.get("grounding")), "repairs": mapping(mapping(usage.get("repairs")).get("stages"))}
    charts = {"seconds": [(k, v["seconds"]) for k, v in stages.items()],
              "calls": [(k, float(v["lm_calls"])) for k, v in stages.items()],
              "tokens": [(k, float(v["input_tokens"] + v["output_tokens"])) for k, v in stages.items()]}
    max_words = int((cfg.program.get("question") or {}).get("max_words") or 15)
    return render_page(
        "programs/archehr/report.html.j2", program=cfg.program.name, stages=describe_stages(cfg), usage=usage, run=run,
        scores=score_rows(scores) if scores else None, baselines=baselines(scores or {}, cases, key),
        question_form=question_form(records, max_words), charts=charts, keyed=key is not None,
        stage_rows=[(k, int(v["lm_calls"]), int(v["input_tokens"]), int(v["output_tokens"]), v["seconds"])
                    for k, v in stages.items()],
        cases=[case_view(c, by_id[c.case_id], (key or {}).get(c.case_id)) for c in cases if c.case_id in by_id])
