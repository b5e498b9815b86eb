"""answers.md of an ArchEHR run, for a person to check the answers: per case the message, the clinician question,
each answer sentence with the note sentences it cites quoted beneath it and its grounding verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.note_text import split_sentences
from common.report_text import md
from tasks.archehr.data import Case


def render(program: str, source: str, cases: Sequence[Case], records: Sequence[dict[str, Any]],
           cut: Mapping[str, Sequence[Sequence[str]]], grounding: str) -> str:
    """`grounding`: the grounding check's option (`none`: the verdicts say "not checked")."""
    by_id = {str(r["case_id"]): r for r in records}
    done = [c for c in cases if c.case_id in by_id]
    lines = [f"# Answers: program={program}, {len(done)} of {len(cases)} cases", "",
             f"Cases: `{md(source)}`. Each answer sentence is followed by the note sentences it cites, quoted with "
             "their ids, and its grounding verdict.", ""]
    for case in done:
        lines += _case(case, by_id[case.case_id], cut.get(case.case_id, ()), grounding)
    return "\n".join(lines).rstrip() + "\n"


def _case(case: Case, record: dict[str, Any], cut: Sequence[Sequence[str]], grounding: str) -> list[str]:
    note = {s.id: s.text for s in case.sentences}
    lines = [f"## Case {md(case.case_id)}", "", f"**Message:** {md(case.patient_narrative)}", "",
             f"**Clinician question:** {md(record.get('clinician_question') or '')}", ""]
    if case.clinician_question and case.clinician_question != record.get("clinician_question"):
        lines += [f"*The case's clinician question:* {md(case.clinician_question)}", ""]
    for group in cut:
        lines += [f"*Note sentences {group[0]}-{group[-1]} are one sentence of the note cut by length (no sentence "
                  "end the splitter knows).*", ""]
    if record.get("answer") is None:
        return [*lines, "*No note: the clinician question only (Subtask 1).*", ""]
    verdicts = {str(v.get("answer_id")): v for v in record.get("grounding") or []}
    check = "" if record.get("grounding") is not None else f" (grounding not checked: program/archehr/grounding={grounding})"
    lines += [f"**Answer**{check}:", ""]
    if record.get("alignment_source") == "generated":
        cites = {str(a["answer_id"]): [str(i) for i in a["evidence_id"]] for a in record.get("alignment") or []}
        kept = [(str(a["id"]), a["text"]) for a in record.get("answer_sentences") or []]
        lines += _sentences(kept, cites, verdicts, note)
        dropped = [(i, v) for i, v in verdicts.items() if i not in dict(kept)]
        if dropped:
            lines += ["*Dropped by the grounding check:*", ""]
            lines += _sentences([(i, v.get("text", "")) for i, v in dropped], {}, verdicts, note)
        return lines
    # Subtask 4 aligned the case's given answer sentences: each of the program's own is shown with the grounding
    # check's support, else the note sentence it quotes; then the given sentences with the alignment's citations
    own = [(str(n), t) for n, t in enumerate(split_sentences(record["answer"]), 1)]
    quoted = {text: sid for sid, text in reversed(list(note.items()))}
    support = {i: [str(x) for x in verdicts[i].get("support_ids") or []] if i in verdicts else
               [quoted[t]] if t in quoted else [] for i, t in own}
    lines += _sentences(own, support, verdicts, note)
    cites = {str(a["answer_id"]): [str(i) for i in a["evidence_id"]] for a in record.get("alignment") or []}
    given = [(a.id, a.text) for a in case.answer_sentences]
    lines += ["**The case's answer sentences, aligned (Subtask 4):**", ""]
    return lines + _sentences(given, cites, {}, note, verdict=False)


def _sentences(items: Sequence[tuple[str, str]], cites: Mapping[str, Sequence[str]], verdicts: Mapping[str, Any],
               note: Mapping[str, str], verdict: bool = True) -> list[str]:
    lines: list[str] = []
    for n, (aid, text) in enumerate(items, 1):
        found = verdicts.get(aid)
        said = f" — *{md(found['verdict'])}*" if verdict and found else ""
        if verdict and found and found.get("refill"):  # not the answer's own words: a quote put in a dropped one's place
            said += " (quoted from the note: refill)"
        if found and found.get("reasons"):
            said += f" ({md('; '.join(str(r) for r in found['reasons']))})"
        lines.append(f"{n}. {md(text)}{said}")
        ids = cites.get(aid) or []
        lines += [f"   > - [{md(i)}] {md(note.get(i, '(not a sentence of this note)'))}" for i in ids]
        if not ids:
            lines.append("   > - (cites no note sentence)")
    return [*lines, ""]
