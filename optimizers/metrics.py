"""The official task metrics, wrapped for DSPy optimizers: `(example, pred, trace=None) -> float`.

Per program (ArchEHR overall, MEDIQA-CORR AggregateC-style per note) and per stage (the evidence scorer against
Subtask 2 strict F1, the question interpreter against Subtask 1 ROUGE-Lsum), so one stage can be compiled alone.
`with_feedback` turns any of them into GEPA's form `(gold, pred, trace, pred_name, pred_trace) -> Prediction(score,
feedback)`. Model-based metrics (BERTScore, AlignScore) are left out: they are slow per call and may be unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from tasks.archehr.data import KeyCase
from tasks.archehr.metrics import score_subtask2, score_subtask4
from tasks.text_metrics import rouge


def _rouge_lsum(reference: str, prediction: str) -> float:
    return rouge([reference], [prediction or ""])["rougeLsum"]


def archehr_question_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """Stage 1 vs the reference clinician question: ROUGE-Lsum F (the ROUGE part of Subtask 1)."""
    return _rouge_lsum(example.clinician_question, pred.clinician_question)


def archehr_evidence_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """Stage 2 vs the key: Subtask 2 strict F1 of this case (official empty-set rules)."""
    key: KeyCase = example.key
    return score_subtask2({key.case_id: list(pred.evidence_ids)}, {key.case_id: key})["strict_micro_f1"] / 100


def archehr_case_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """One case, the whole cascade: mean of ST1 ROUGE-Lsum, ST2 strict F1, ST3 ROUGE-Lsum and ST4 F1 where the
    example holds the reference (cheap, lexical parts of each subtask's official overall)."""
    parts: list[float] = []
    if getattr(example, "clinician_question", None):
        parts.append(archehr_question_metric(example, pred))
    key: KeyCase | None = getattr(example, "key", None)
    if key is not None and pred.get("answer") is not None:
        parts.append(archehr_evidence_metric(example, pred))
        if key.answer_without_citations:
            parts.append(_rouge_lsum(key.answer_without_citations, pred.answer))
        if key.answer_sentences and pred.get("alignment_source") == "reference":
            parts.append(score_subtask4({key.case_id: pred.alignment}, {key.case_id: key})["micro_f1"] / 100)
    return sum(parts) / len(parts) if parts else 0.0


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


METRICS: dict[str, Callable[..., float]] = {
    "archehr_case": archehr_case_metric,
    "archehr_question": archehr_question_metric,
    "archehr_evidence": archehr_evidence_metric,
    "mediqa_note": mediqa_note_metric,
}


def with_feedback(metric: Callable[..., float], describe: Callable[[Any, Any, float], str] | None = None):
    """GEPA's metric form: a score plus textual feedback the reflection LM can act on."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        value = float(metric(gold, pred, trace))
        text = describe(gold, pred, value) if describe else f"score {value:.3f} (1.0 is a perfect match)"
        return dspy.Prediction(score=value, feedback=text)

    return gepa_metric


def describe_mediqa(gold, pred, value: float) -> str:
    note, c = gold.note, pred.correction
    if note.error_flag == 0:
        return "Correct: the text has no error." if c.flag == 0 else (
            f"Wrong: the text has no error, but sentence {c.sentence_id} was changed.")
    return (f"The error is in sentence {note.error_sentence_id} ('{note.error_sentence}'); the reference correction is "
            f"'{note.corrected_sentence}'. The program answered sentence {c.sentence_id}: '{c.corrected}'. "
            f"Score {value:.2f}.")


def describe_archehr(gold, pred, value: float) -> str:
    lines = [f"score {value:.3f}"]
    if getattr(gold, "clinician_question", None):
        lines.append(f"reference question: {gold.clinician_question}; predicted: {pred.clinician_question}")
    key = getattr(gold, "key", None)
    if key is not None:
        lines.append(f"essential evidence ids: {sorted(key.essential)}; selected: {list(pred.evidence_ids)}")
    return "\n".join(lines)
