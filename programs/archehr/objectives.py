"""ArchEHR-QA metrics for DSPy optimizers, per program and per stage (so one stage can be compiled alone): the
official metrics' lexical parts. Model-based ones (BERTScore, AlignScore) are slow per call and may need a network."""

from __future__ import annotations

from typing import Any

import dspy

from tasks.archehr.data import KeyCase
from tasks.archehr.scoring import score_subtask2, score_subtask4
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


OBJECTIVES = {
    "archehr_case": archehr_case_metric,
    "archehr_question": archehr_question_metric,
    "archehr_evidence": archehr_evidence_metric,
}


def describe_archehr(gold, pred, value: float) -> str:
    lines = [f"score {value:.3f}"]
    if getattr(gold, "clinician_question", None):
        lines.append(f"reference question: {gold.clinician_question}; predicted: {pred.clinician_question}")
    key = getattr(gold, "key", None)
    if key is not None:
        lines.append(f"essential evidence ids: {sorted(key.essential)}; selected: {list(pred.evidence_ids)}")
    return "\n".join(lines)
