"""report.html of an ArchEHR run: scores (with trivial baselines given a key), usage per stage, and each case's
narrative, questions, note shaded by evidence score with gold labels, and answer with citations and grounding flags."""

from __future__ import annotations

from collections import Counter
from typing import Any

from common.html import bar_chart, echo, esc, filters, page, table
from common.record_fields import entries, integer, mapping, number, seconds, text, texts
from common.report_text import counts
from programs.archehr.grounding.verdicts import flagged
from programs.archehr.question.text import first_person, opening
from programs.archehr.report import describe_stages
from tasks.archehr.data import Case, KeyCase
from tasks.archehr.scoring import score_subtask2

SHADE = {1: "#ffffff", 2: "#eef4fb", 3: "#d9e8f7", 4: "#b9d4f1", 5: "#92bdea"}


def readable(record: dict[str, Any]) -> dict[str, Any]:
    """The fields the report shows, typed: a hand-edited record's odd value (`"seconds": "abc"`, ids not a list)
    reads as missing, so `task=report` still writes the page."""
    verdicts = [{**v, "answer_id": text(v.get("answer_id")) or "?", "text": text(v.get("text")) or "",
                 "verdict": text(v.get("verdict")), "reasons": texts(v.get("reasons")),
                 "support_ids": texts(v.get("support_ids")), "refill": bool(v.get("refill"))}  # the pipeline writes why
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


def _marked_narrative(case: Case) -> str:
    marked = esc(case.patient_narrative)
    for phrase in sorted(case.patient_question_phrases, key=len, reverse=True):
        quoted = esc(phrase)
        if quoted and quoted in marked:
            marked = marked.replace(quoted, f'<mark title="patient question phrase"><bdi>{quoted}</bdi></mark>', 1)
    return f"<bdi>{marked}</bdi>"  # isolated like every echoed text


def _note(case: Case, record: dict[str, Any], key: KeyCase | None) -> str:
    scores = record.get("scores") or {}
    selected = set(record.get("evidence_ids") or [])
    rows = []
    for s in case.sentences:
        score = scores.get(s.id)
        chosen = s.id in selected
        meta = [f"score {score}" if score is not None else "no score", "selected" if chosen else ""]
        gold_mark = ""
        if key is not None:
            label = key.relevance.get(s.id, "not-relevant")
            essential = label == "essential"
            mark = ("TP" if chosen and essential else "FP" if chosen else "FN" if essential else "")
            css = {"TP": "good", "FP": "bad", "FN": "bad"}.get(mark, "muted")
            gold_mark = f'<span class="tag {css}" title="gold label">{echo(label)}{" · " + mark if mark else ""}</span>'
        rows.append(f'<div class="sent{" selected" if chosen else ""}" id="c{esc(case.case_id)}-s{esc(s.id)}" '
                    f'data-selected="{int(chosen)}" data-score="{esc(score)}" '
                    f'style="background:{SHADE.get(score, "#ffffff")}"><span class="meta">[{echo(s.id)}] '
                    f'{esc(" ".join(m for m in meta if m))}</span>{gold_mark}{echo(s.text)}</div>')
    return '<div class="note">' + "".join(rows) + "</div>"


def _cites(case: Case, ids: list[str]) -> str:
    return "".join(f'<a class="cite" href="#c{esc(case.case_id)}-s{esc(i)}">[{echo(i)}]</a>' for i in ids)


def _answer(case: Case, record: dict[str, Any]) -> str:
    if record.get("answer") is None:
        return '<p class="muted">No note: Subtask 1 only.</p>'
    verdicts = {v["answer_id"]: v for v in record.get("grounding") or []}
    links = {a["answer_id"]: a["evidence_id"] for a in record.get("alignment") or []}
    own = record.get("alignment_source") == "generated"
    parts = []
    sentences = (record.get("answer_sentences") or []) if own else []
    if not sentences:  # the alignment was of reference sentences: show our answer, checked sentence by sentence
        sentences = [{"id": v["answer_id"], "text": v["text"]} for v in verdicts.values()] or \
            [{"id": "1", "text": record["answer"]}]
    # an extractive answer quotes note sentences: without verdicts, each quoted sentence cites its source
    quoted = {sent.text.strip(): sent.id for sent in case.sentences}
    for a in sentences:
        v = verdicts.get(a["id"])
        ids = links.get(a["id"], []) if own else (v or {}).get("support_ids", [])
        if not own and v is None:
            ids = [sid for t, sid in quoted.items() if t and t in a["text"]]
        cites = _cites(case, ids)
        if v and flagged(v):
            parts.append(f'<p class="unsupported"><strong>{echo(v["verdict"] or "no verdict")}:</strong> '
                         f'{echo(a["text"])}{cites} <span class="muted">({"; ".join(echo(r) for r in v["reasons"])})'
                         f'</span></p>')
        else:
            label = '<span class="tag good">supported</span>' if v else ""
            if v and v.get("refill"):  # on_unsupported=refill: a quote of the note put in a dropped sentence's place
                label += ' <span class="tag" title="on_unsupported=refill">quoted from the note (refill)</span>'
            judge = mapping((v or {}).get("judge"))
            if judge.get("unavailable"):
                label += f' <span class="muted">({echo(judge["unavailable"])})</span>'
            parts.append(f"<p>{echo(a['text'])}{cites} {label}</p>")
    alignment = ""
    if not own and record.get("alignment"):
        rows = "".join(f"<tr><td>{echo(a['answer_id'])}</td><td>{_cites(case, a['evidence_id']) or 'none'}</td></tr>"
                       for a in record["alignment"])
        alignment = ("<h3>Alignment of the reference answer sentences (Subtask 4)</h3><table><thead><tr>"
                     "<th scope=col>answer sentence</th><th scope=col>cited note sentences</th></tr></thead>"
                     f"<tbody>{rows}</tbody></table>")
    return '<div class="answer">' + "".join(parts) + "</div>" + alignment


def _candidates(record: dict[str, Any]) -> str:
    """The questions the learned stage weighed, the pick first, with the rerank's parts (none from an LM stage)."""
    rows = record.get("question_candidates")
    if not isinstance(rows, list) or not rows:
        return ""
    rows = [r for r in rows if isinstance(r, dict)]
    # the first row is the pick when eligible and the record's question (else the stage fell back)
    picked = bool(rows) and bool(rows[0].get("eligible")) and rows[0].get("question") == record.get("clinician_question")
    body = [[row.get("question"), row.get("score"), row.get("log_prob"), row.get("coverage"), row.get("opening_share"),
             "picked" if picked and n == 0 else ("" if row.get("eligible") else f"excluded: {row.get('excluded')}")]
            for n, row in enumerate(rows)]
    summary = f"{len(body)} candidate question{'s' if len(body) != 1 else ''} the stage weighed" + (
        "" if picked else "; none picked: the question above is the message's own first question sentence")
    return (f'<details class="candidates"><summary>{esc(summary)}</summary>'
            '<div class="scroll">' + table(["candidate", "score", "log-prob", "coverage", "opening share", ""], body,
                    "score = mean token log-prob + coverage_weight x coverage (share of its content words the message "
                    "uses) - opening_weight x opening share (of training references opening with its first 4 words); "
                    "the best whole question that shares a word with the message is picked")
            + "</div></details>")


def case_section(case: Case, record: dict[str, Any], key: KeyCase | None) -> str:
    errors = len(set(record["evidence_ids"]) ^ key.essential) if key is not None else 0
    unsupported = sum(flagged(v) for v in record["grounding"] or [])
    fallbacks, empty = record["fallbacks"], record["degenerate"]
    badges = [f'<span class="{"bad" if errors else "good"}">{errors} evidence disagreements with gold</span>'
              if key is not None else "",
              f'<span class="warn">fallbacks: {", ".join(echo(f) for f in fallbacks)}</span>' if fallbacks else "",
              # a reply that parsed but said nothing: as visible as a fallback
              f'<span class="warn">degenerate output: {", ".join(echo(f"{k}: {v}") for k, v in empty.items())}'
              '</span>' if empty else "",
              f'<span class="bad">{unsupported} unsupported sentences</span>' if unsupported else "",
              f'<span class="muted">{seconds(record["seconds"])}</span>']
    gold_q = f"<p><strong>Reference question:</strong> {echo(case.clinician_question)}</p>" if case.clinician_question else ""
    return (f'<section class="case" id="case-{esc(case.case_id)}" data-errors="{int(errors > 0)}" '
            f'data-fallbacks="{int(bool(fallbacks or empty))}" data-unsupported="{int(unsupported > 0)}">'
            f'<h2>Case {echo(case.case_id)}</h2><div class="badges">{"".join(badges)}</div>'
            f'<div class="grid"><div><h3>Patient narrative</h3><p>{_marked_narrative(case)}</p>'
            f'<p><strong>Clinician question:</strong> {echo(record["clinician_question"])}</p>'
            f"{_candidates(record)}{gold_q}"
            f"<h3>Answer</h3>{_answer(case, record)}</div>"
            f'<div><h3>Note (shaded by evidence score; selected sentences have a blue bar)</h3>'
            f'<p class="muted">selection: {echo(record["selection"])}</p>{_note(case, record, key)}</div></div>'
            "</section>")


def _scores(scores: dict[str, Any] | None, cases: list[Case], key: dict[str, KeyCase] | None) -> str:
    if not scores:
        return "<p>No scores: these cases have no key and no reference questions.</p>"
    rows = []
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        s = mapping(scores.get(st))
        if "overall_score" in s:
            rows.append((st, s["overall_score"], ", ".join(f"{k} {v:.2f}" for k, v in s.items()
                                                         if isinstance(v, float) and k != "overall_score")))
        else:
            rows.append((st, None, s.get("invalid") or s.get("unavailable") or "not scored"))
    out = table(["subtask", "overall", "metrics"], rows)
    if key:
        with_note = [c for c in cases if c.sentences and c.case_id in key]
        baselines = {"all sentences": {c.case_id: [s.id for s in c.sentences] for c in with_note},
                     "first 3 sentences": {c.case_id: [s.id for s in c.sentences[:3]] for c in with_note}}
        sub_key = {c.case_id: key[c.case_id] for c in with_note}
        ours = (scores.get("subtask_2") or {}).get("strict_micro_f1")
        out += "<h3>Subtask 2 against trivial baselines (same cases)</h3>" + table(
            ["evidence", "strict micro F1"],
            [("this run", ours)] + [(name, score_subtask2(pred, sub_key)["strict_micro_f1"])
                                    for name, pred in baselines.items()])
    return out


def _question_form(records: list[dict[str, Any]], max_words: int) -> str:
    """The form of the run's clinician questions, no reference needed: one opening on over 30% of them is a template,
    the first person is the writer's voice, not a clinician's."""
    questions = [q for r in records if isinstance(q := r.get("clinician_question"), str) and q]
    if not questions:
        return ""
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
    return "<h2>Questions</h2>" + table(["form of the clinician questions", ""], rows)


def render(cfg: Any, cases: list[Case], key: dict[str, KeyCase] | None, records: list[dict[str, Any]],
           usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
    records = [readable(r) for r in records]
    by_id = {r["case_id"]: r for r in records}
    shown = [c for c in cases if c.case_id in by_id]
    # usage.json read as typed as the records
    stages = {str(k): {f: number(mapping(v).get(f)) or 0.0 for f in ("lm_calls", "input_tokens", "output_tokens",
                                                                       "seconds")}
              for k, v in mapping(usage.get("stages")).items()}
    grounding = mapping(usage.get("grounding"))
    repairs = mapping(mapping(usage.get("repairs")).get("stages"))
    per_case = number(usage.get("lm_calls_per_case"))
    summary = (f"<p>program={esc(cfg.program.name)}; stages: {esc(describe_stages(cfg))}; "
               f"{esc(usage.get('cases', 0))} cases, {seconds(usage.get('seconds_per_case'))} and "
               f"{'?' if per_case is None else f'{per_case:.2f}'} LM calls per case; fallbacks: "
               f"{echo(counts(mapping(usage.get('fallbacks'))))}; degenerate outputs: "
               f"{echo(counts(mapping(usage.get('degenerate'))))}; markup repairs: {echo(counts(repairs))}; grounding: "
               + (f"{esc(grounding.get('unsupported', 0))} of {esc(grounding.get('answer_sentences', 0))} answer "
                  "sentences unsupported" + (f", {esc(grounding['refilled'])} quoted from the note in their place"
                                             if grounding.get("refilled") else "") + "</p>"
                  if grounding else "not checked (program/archehr/grounding=none)</p>"))
    charts = (bar_chart("seconds per stage (all cases)", [(k, v["seconds"]) for k, v in stages.items()], " s")
              + bar_chart("LM calls per stage", [(k, float(v["lm_calls"])) for k, v in stages.items()])
              + bar_chart("tokens per stage (in + out)",
                          [(k, float(v["input_tokens"] + v["output_tokens"])) for k, v in stages.items()]))
    index = '<nav class="index" aria-label="case index">Cases: ' + " ".join(
        f'<a href="#case-{esc(c.case_id)}">{echo(c.case_id)}</a>' for c in shown) + "</nav>"
    options = [("fallbacks", "only cases with fallbacks"), ("unsupported", "only cases with unsupported sentences")]
    if key is not None:
        options.insert(0, ("errors", "only disagreements with gold"))
    max_words = int((cfg.program.get("question") or {}).get("max_words") or 15)
    body = (f"<h1>clinprog run: {esc(cfg.program.name)}</h1>{summary}<h2>Scores</h2>{_scores(scores, cases, key)}"
            f"{_question_form(records, max_words)}"
            f"<h2>Usage per stage</h2>{charts}"
            + table(["stage", "LM calls", "input tokens", "output tokens", "seconds"],
                    [(k, int(v["lm_calls"]), int(v["input_tokens"]), int(v["output_tokens"]), v["seconds"])
                     for k, v in stages.items()])
            + f"<h2>Cases</h2>{index}{filters(options)}"
            + "".join(case_section(c, by_id[c.case_id], (key or {}).get(c.case_id)) for c in shown))
    return page(f"clinprog {cfg.program.name} run", body)
