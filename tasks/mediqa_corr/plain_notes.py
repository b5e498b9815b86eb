"""MEDIQA-CORR notes from plain inputs (`data.path=`): a JSON lines or CSV table with `id` and `note`, or a folder of
`.txt` files (the file name is the id). Notes are split into sentences numbered from 0, as MEDEC numbers them, by
common/note_text; a CSV with MEDEC's `Text ID` column is MEDEC's own format (tasks/mediqa_corr/data.py)."""

from __future__ import annotations

import csv
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.logs import printable
from common.note_text import numbered_note
from common.plain_rows import PlainInputError, Row, Table, is_plain, limit, read_folder, read_rows, split_mode
from tasks.mediqa_corr.data import Note, text_id_problem

KNOB = "data.plain"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlainNotes:
    notes: list[Note]
    cut: dict[str, list[list[str]]]   # text id -> per sentence cut by length, the ids of its pieces
    files: dict[str, str]             # name -> path of every file read (the run's fingerprint hashes them)


def is_medec(path: str | Path) -> bool:
    """A CSV whose header names MEDEC's `Text ID` column."""
    with Path(path).open(newline="", encoding="utf-8-sig", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    return "Text ID" in [c.strip() for c in header]


def is_plain_notes(path: str | Path) -> bool:
    """`data.path` names plain notes: a folder, a .jsonl, or a .csv that is not MEDEC's."""
    path = Path(str(path))
    if path.is_dir():
        return True
    if not is_plain(path) or not path.is_file():
        return False
    return path.suffix.lower() == ".jsonl" or not is_medec(path)


def load_plain_notes(path: str | Path, settings: Mapping[str, Any], limit_notes: int | None = None) -> PlainNotes:
    """The notes of `path` (checked before any model loads; `settings` is `data.plain`), the first `limit_notes`."""
    max_sentences, knob = limit(settings, "max_sentences", f"{KNOB}.max_sentences")
    max_chars = limit(settings, "max_sentence_chars", f"{KNOB}.max_sentence_chars")[0]
    split = split_mode(settings, f"{KNOB}.split")
    table = Table(required=("id", "note"), max_chars={"id": (200, "the id limit"),
                                                      "note": limit(settings, "max_note_chars", f"{KNOB}.max_note_chars")})
    path = Path(str(path))
    rows = read_folder(path, table, "note") if path.is_dir() else read_rows(path, table)
    notes, cut = [], {}
    for row in rows[:limit_notes] if limit_notes else rows:
        note, groups = _note(row, max_chars, max_sentences, knob, split)
        if groups:
            cut[note.text_id] = groups
            log.warning("%s: %s over %s.max_sentence_chars=%d characters with no sentence end the splitter knows, "
                        "cut by length into sentences %s (numbered_notes.csv and answers.md say so)",
                        printable(row.where, limit=None), "a sentence" if len(groups) == 1 else f"{len(groups)} sentences",
                        KNOB, max_chars, "; ".join(f"{g[0]}-{g[-1]}" for g in groups))
        notes.append(note)
    files = {f"notes/{Path(r.file).name}": r.file for r in rows} if path.is_dir() else {"notes": str(path)}
    return PlainNotes(notes, cut, files)


def _note(row: Row, max_chars: int, max_sentences: int, knob: str, split: str) -> tuple[Note, list[list[str]]]:
    text_id, text = row.values["id"], row.values["note"]
    problem = text_id_problem(text_id)
    if problem:
        raise PlainInputError(f"{row.where}: {printable(problem, limit=None)}")
    texts, groups = numbered_note(text, max_chars, split)
    if len(texts) > max_sentences:
        raise PlainInputError(f"{row.where}: field 'note' splits into {len(texts):,} sentences, over {knob}={max_sentences}")
    sentences = tuple((str(n), t) for n, t in enumerate(texts))
    return Note(text_id, text, sentences), [[sentences[i][0] for i in g] for g in groups]
