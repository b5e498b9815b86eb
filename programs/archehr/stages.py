"""What every implementation of an ArchEHR stage takes and returns, LM or not, so config can swap them. `uses_lm` (a
class attribute, False when absent) says whether it calls its role's LM."""

from __future__ import annotations

from typing import ClassVar, Protocol

import dspy

from common.errors import ConfigError
from tasks.archehr.data import AnswerSentence, NoteSentence

ANCHORS: tuple[str, ...] = ("clinician_question", "patient_narrative", "both")


class QuestionStage(Protocol):
    """-> clinician_question (<= max_words), fallback (None or why the LM output was not used)."""

    uses_lm: ClassVar[bool]
    max_words: int

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction: ...


class EvidenceStage(Protocol):
    """-> evidence_ids, scores ({sentence id: 1-5} or None), selection (how the ids were chosen), fallback.
    `anchor`: what the sentences are scored against (the question, the narrative or both)."""

    uses_lm: ClassVar[bool]
    anchor: str

    def forward(self, clinician_question: str, patient_narrative: str,
                sentences: list[NoteSentence]) -> dspy.Prediction: ...


class AnswerStage(Protocol):
    """-> answer (<= max_words, soft cut), fallback. A `forward` that also takes `scores` gets the evidence stage's."""

    uses_lm: ClassVar[bool]
    max_words: int
    soft_cut_ratio: float

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str) -> dspy.Prediction: ...


class AlignmentStage(Protocol):
    """-> alignment ([{answer_id, evidence_id}]), dropped_ids (unknown ids removed), fallback."""

    uses_lm: ClassVar[bool]
    max_citations: int

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction: ...


STAGE_PROTOCOLS: dict[str, type] = {"question": QuestionStage, "evidence": EvidenceStage, "answer": AnswerStage,
                                    "alignment": AlignmentStage}


def missing_members(implementation: object, protocol: type) -> list[str]:
    """What `implementation` lacks of `protocol` (`uses_lm` is optional). Not by isinstance: DSPy warns when an
    instance's forward is touched."""
    wanted = [name for name in getattr(protocol, "__annotations__", {}) if name != "uses_lm"]
    missing = [name for name in wanted if not hasattr(implementation, name)]
    return missing + ([] if callable(getattr(type(implementation), "forward", None)) else ["forward"])


def uses_lm(implementation: object) -> bool:
    return bool(getattr(implementation, "uses_lm", False))


def check_anchor(anchor: str) -> str:
    if anchor not in ANCHORS:
        raise ConfigError(f"program.evidence.anchor must be one of {ANCHORS}, not {anchor!r}")
    return anchor


def anchor_parts(anchor: str, clinician_question: str, patient_narrative: str) -> tuple[str, str]:
    """(question, narrative) for a stage that reads both: an anchor of one part is both."""
    return {"clinician_question": (clinician_question, clinician_question),
            "patient_narrative": (patient_narrative, patient_narrative),
            "both": (clinician_question, patient_narrative)}[anchor]


def anchor_text(anchor: str, clinician_question: str, patient_narrative: str) -> str:
    """The one query text for a stage that reads a single one."""
    question, narrative = anchor_parts(anchor, clinician_question, patient_narrative)
    return f"{question} {narrative}" if anchor == "both" else question
