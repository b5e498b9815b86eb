"""ArchEHR cases from a plain table (`data.cases=notes.jsonl|notes.csv`): one row per case with `id`, `message` and
`note`; optional `patient_question` (key phrases, one a line), `clinician_question` and `answer` (aligned by Subtask 4).
Note and answer are split into sentences numbered from 1 by common/note_text, as the page splits them; a sentence over
`max_sentence_chars` is cut by length, and the cases say which."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.logs import printable
from common.note_text import numbered_note, split_note
from common.plain_rows import PlainInputError, Table, limit, read_rows, split_mode
from tasks.archehr.data import AnswerSentence, Case, NoteSentence

KNOB = "data.plain"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlainCases:
    cases: list[Case]
    cut: dict[str, list[list[str]]]   # case id -> per sentence cut by length, the ids of its pieces


def load_plain_cases(path: str | Path, settings: Mapping[str, Any]) -> PlainCases:
    """The cases of `path`, every row checked before any model loads; `settings` is `data.plain`."""
    max_sentences, knob = limit(settings, "max_sentences", f"{KNOB}.max_sentences")
    max_chars = limit(settings, "max_sentence_chars", f"{KNOB}.max_sentence_chars")[0]
    split = split_mode(settings, f"{KNOB}.split")
    message = limit(settings, "max_message_chars", f"{KNOB}.max_message_chars")
    note = limit(settings, "max_note_chars", f"{KNOB}.max_note_chars")
    table = Table(required=("id", "message", "note"), optional=("patient_question", "clinician_question", "answer"),
                  max_chars={"id": (200, "the id limit"), "message": message, "patient_question": message,
                             "clinician_question": message, "note": note, "answer": note})
    cases, cut = [], {}
    for row in read_rows(path, table):
        v = row.values
        texts, groups = numbered_note(v["note"], max_chars, split)
        if len(texts) > max_sentences:
            raise PlainInputError(f"{row.where}: field 'note' splits into {len(texts):,} sentences, over "
                                  f"{knob}={max_sentences}")
        sentences = tuple(NoteSentence(str(n), t) for n, t in enumerate(texts, 1))
        if groups:
            cut[v["id"]] = [[sentences[i].id for i in g] for g in groups]
            log.warning("%s: %s over %s.max_sentence_chars=%d characters with no sentence end the splitter knows, "
                        "cut by length into sentences %s (numbered_cases.xml and answers.md say so)",
                        printable(row.where, limit=None), "a sentence" if len(groups) == 1 else f"{len(groups)} sentences",
                        KNOB, max_chars, "; ".join(f"{g[0]}-{g[-1]}" for g in cut[v["id"]]))
        phrases = tuple(p.strip() for p in v.get("patient_question", "").split("\n") if p.strip())
        answer = tuple(AnswerSentence(str(n), t) for n, t in enumerate(split_note(v.get("answer", ""), split), 1))
        cases.append(Case(v["id"], v["message"], phrases, v.get("clinician_question"), v["note"], sentences, answer))
    return PlainCases(cases, cut)

