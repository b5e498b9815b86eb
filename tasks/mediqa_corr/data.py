"""Load MEDIQA-CORR / MEDEC CSV files (multi-line cells, padding rows, float ids such as `8.0`); sentence ids are
taken from the `Sentences` column as given (`"<id> <sentence>"` per line)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from common.errors import ClinprogError

REQUIRED = ("Text ID", "Text", "Sentences")
LABELS = ("Error Flag", "Error Sentence ID", "Corrected Sentence")
_LINE = re.compile(r"^\s*(\d+)\s+(.*\S)\s*$")


class MediqaDataError(ClinprogError, ValueError):
    """Malformed MEDIQA-CORR input; the message names the file, the row and the column."""


# the text id of the official scorer's line pattern (submission.LINE): the id rule for a run's notes and a request's
TEXT_ID = re.compile(r"[a-z0-9\-]+")


def text_id_problem(text_id: str) -> str | None:
    """Why `text_id` cannot name a note (the official scorer would skip its line) and what to use; None when it can."""
    if TEXT_ID.fullmatch(text_id):
        return None
    suggestion = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text_id.lower())).strip("-") or "note-1"
    return (f"the id {text_id!r} is outside the official scorer's pattern [a-z0-9-]+, so no submission.txt line can "
            f"hold it; use lowercase letters, digits and '-' only (e.g. {suggestion!r})")


@dataclass(frozen=True)
class Note:
    text_id: str
    text: str
    sentences: tuple[tuple[str, str], ...]        # (sentence id, sentence) as given
    error_flag: int | None = None
    error_sentence_id: int | None = None
    error_sentence: str | None = None
    corrected_sentence: str | None = None
    error_type: str | None = None

    @property
    def sentence_ids(self) -> list[str]:
        return [sid for sid, _ in self.sentences]

    def sentence(self, sid: str | int) -> str | None:
        return dict(self.sentences).get(str(sid))

    @property
    def has_labels(self) -> bool:
        return self.error_flag is not None

    def numbered(self) -> str:
        return "\n".join(f"[{sid}] {text}" for sid, text in self.sentences)


def _int(value: str, where: str, column: str) -> int:
    try:
        return int(float(value))  # "8.0" from padded releases
    except ValueError:
        raise MediqaDataError(f"{where}: column {column!r} is not an integer: {value!r}") from None


def parse_sentences(cell: str, where: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for line in cell.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match:
            out.append((match.group(1), match.group(2)))
        elif out:
            # a line without an id continues the previous sentence (lab tables: "14 Leukocyte count 11,100/mm3" / "Serum")
            sid, text = out[-1]
            out[-1] = (sid, f"{text} {line.strip()}")
        else:
            raise MediqaDataError(f"{where}: 'Sentences' starts with a line without an id: {line[:80]!r}")
    if not out:
        raise MediqaDataError(f"{where}: empty 'Sentences' column")
    ids = [sid for sid, _ in out]
    if len(set(ids)) != len(ids):
        raise MediqaDataError(f"{where}: duplicate sentence ids in 'Sentences'")
    return tuple(out)


def load_notes(path: str | Path, limit: int | None = None) -> list[Note]:
    path = Path(path)
    if not path.is_file():
        raise MediqaDataError(f"{path}: no such file (set data.path=...)")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            n = 0  # the row being read is n + 1 (row 1: the header), so a malformed one is named
            columns = reader.fieldnames or []
            n = 1
            missing = [c for c in REQUIRED if c not in columns]
            if missing:
                raise MediqaDataError(f"{path}: missing columns {missing}; found {columns}")
            labelled = all(c in columns for c in LABELS)
            notes: list[Note] = []
            first_row: dict[str, str] = {}
            for n, row in enumerate(reader, 2):
                if not any((v or "").strip() for k, v in row.items() if k is not None):
                    continue  # all-empty padding row
                where = f"{path}, row {n}"
                if None in row.values() or None in row:
                    # DictReader pads a short row with None (a file cut inside a quoted field ends this way)
                    raise MediqaDataError(f"{where}: row has {sum(v is not None for v in row.values())} of "
                                          f"{len(columns)} columns (a file cut inside a quoted field?)")
                text_id = (row.get("Text ID") or "").strip()
                if not text_id:
                    raise MediqaDataError(f"{where}: empty 'Text ID'")
                where = f"{path}, row {n} ({text_id})"
                if problem := text_id_problem(text_id):
                    raise MediqaDataError(f"{where}: 'Text ID': {problem}")
                if text_id in first_row:
                    raise MediqaDataError(f"{where}: duplicate 'Text ID' (first at row {first_row[text_id]})")
                first_row[text_id] = str(n)
                kwargs = {}
                if labelled and (row.get("Error Flag") or "").strip():
                    flag = _int(row["Error Flag"], where, "Error Flag")
                    if flag not in (0, 1):
                        raise MediqaDataError(f"{where}: 'Error Flag' must be 0 or 1, not {flag}")
                    # kept raw, as the official scorer keeps it (whitespace changes its ROUGE); "NA" or empty is none
                    raw = row.get("Corrected Sentence") or ""
                    corrected = None if raw.strip() in ("", "NA") else raw
                    kwargs = {
                        "error_flag": flag,
                        "error_sentence_id": _int(row.get("Error Sentence ID") or "-1", where, "Error Sentence ID"),
                        "error_sentence": (row.get("Error Sentence") or "").strip() or None,
                        "corrected_sentence": corrected,
                        "error_type": (row.get("Error Type") or "").strip() or None,
                    }
                sentences = parse_sentences(row["Sentences"], where)
                sid = kwargs.get("error_sentence_id", -1)
                if kwargs.get("error_flag") == 1 and str(sid) not in {s for s, _ in sentences}:
                    raise MediqaDataError(f"{where}: 'Error Sentence ID' {sid} is not a sentence of the note "
                                          f"(ids {sentences[0][0]}..{sentences[-1][0]})")
                notes.append(Note(text_id, (row.get("Text") or "").strip(), sentences, **kwargs))
                if limit and len(notes) >= limit:
                    break
    except csv.Error as exc:  # e.g. a cell over csv.field_size_limit() (131072 characters)
        raise MediqaDataError(f"{path}, row {n + 1}: malformed CSV ({exc})") from None
    except UnicodeDecodeError as exc:
        raise MediqaDataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not notes:
        raise MediqaDataError(f"{path}: no notes")
    return notes
