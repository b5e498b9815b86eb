"""MEDIQA-CORR metric for DSPy optimizers: one note, AggregateC-style."""

from __future__ import annotations

from typing import Any

import dspy


def mediqa_note_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """One note, AggregateC-style: NA/NA = 1, NA vs text = 0, else ROUGE-1 F of the correction (the `rouge`
    package, as the official script); a wrong sentence id scores 0."""
    from rouge import Rouge

    note, c = example.note, pred.correction
    if note.error_flag == 0:
        return 1.0 if c.flag == 0 else 0.0
    if c.flag == 0 or c.sentence_id != note.error_sentence_id or not c.corrected.strip():
        return 0.0
    return Rouge().get_scores([c.corrected], [note.corrected_sentence])[0]["rouge-1"]["f"]


OBJECTIVES = {"mediqa_note": mediqa_note_metric}


def describe_mediqa(gold, pred, value: float) -> str:
    note, c = gold.note, pred.correction
    if note.error_flag == 0:
        return "Correct: the text has no error." if c.flag == 0 else (
            f"Wrong: the text has no error, but sentence {c.sentence_id} was changed.")
    return (f"The error is in sentence {note.error_sentence_id} ('{note.error_sentence}'); the reference correction is "
            f"'{note.corrected_sentence}'. The program answered sentence {c.sentence_id}: '{c.corrected}'. "
            f"Score {value:.2f}.")


