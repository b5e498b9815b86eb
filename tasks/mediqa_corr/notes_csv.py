"""`numbered_notes.csv`: the numbered notes a run of plain notes used, as a MEDEC CSV, so a flagged sentence id can be
looked up and `data.path=numbered_notes.csv` reruns on the same sentences."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from tasks.mediqa_corr.data import REQUIRED, Note


def notes_csv(notes: Sequence[Note]) -> str:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(REQUIRED)
    for note in notes:
        writer.writerow([note.text_id, note.text, "\n".join(f"{sid} {text}" for sid, text in note.sentences)])
    return out.getvalue()
