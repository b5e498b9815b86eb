"""answers.md of a MEDIQA-CORR run: per note, the sentence the program flagged (quoted with its id) and its correction,
or that it flagged none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.report_text import md
from tasks.mediqa_corr.data import Note


def render(source: str, notes: Sequence[Note], records: Sequence[dict[str, Any]],
           cut: Mapping[str, Sequence[Sequence[str]]]) -> str:
    by_id = {str(r["text_id"]): r for r in records}
    done = [n for n in notes if n.text_id in by_id]
    lines = [f"# Corrections: program=mediqa_corr, {len(done)} of {len(notes)} notes", "",
             f"Notes: `{md(source)}`. Per note, the sentence flagged as erroneous, quoted with its id, and its "
             "correction.", ""]
    for note in done:
        record = by_id[note.text_id]
        lines += [f"## Note {md(note.text_id)}", ""]
        for group in cut.get(note.text_id, ()):
            lines += [f"*Sentences {group[0]}-{group[-1]} are one sentence of the note cut by length (no sentence end "
                      "the splitter knows).*", ""]
        outcome = f" (outcome: {md(record.get('outcome', ''))})" if record.get("outcome") else ""
        if not record.get("flag"):
            lines += [f"No error flagged{outcome}.", ""]
            continue
        sid = str(record.get("sentence_id"))
        flagged = note.sentence(sid)
        lines += [f"**Flagged sentence** [{md(sid)}]{outcome}:", "",
                  f"> {md(flagged) if flagged is not None else '(not a sentence of this note)'}", "",
                  "**Correction:**", "", f"> {md(record.get('corrected') or '')}", ""]
    return "\n".join(lines).rstrip() + "\n"
