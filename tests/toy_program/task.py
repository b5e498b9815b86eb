"""The toy task's formats: notes as JSONL ({"id", "text", "label"?}), a submission as TSV lines `id<TAB>label`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.errors import ClinprogError


class FeverDataError(ClinprogError):
    pass


@dataclass(frozen=True)
class FeverNote:
    note_id: str
    text: str
    label: str | None = None


def load_notes(path: str | Path) -> list[FeverNote]:
    path = Path(path)
    if not path.is_file():
        raise FeverDataError(f"data.notes={path}: no such file")
    notes = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            notes.append(FeverNote(str(row["id"]), str(row["text"]), row.get("label")))
        except (ValueError, KeyError, TypeError) as exc:
            raise FeverDataError(f"{path}:{n}: not a note object with id and text ({exc})") from None
    return notes


def write_submission(labels: dict[str, str], path: Path) -> Path:
    path.write_text("".join(f"{i}\t{label}\n" for i, label in labels.items()), encoding="utf-8")
    return path


def read_submission(path: str | Path) -> dict[str, str]:
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            note_id, label = line.split("\t", 1)
            out[note_id] = label.strip()
    return out


def accuracy(labels: dict[str, str], notes: list[FeverNote]) -> float:
    gold = [n for n in notes if n.label is not None]
    return sum(labels.get(n.note_id) == n.label for n in gold) / len(gold) if gold else 0.0
