"""One ArchEHR prediction as written to predictions.jsonl: the typed record run, evaluate, serve and the reports read.

Built in one place (`record_of`) from the cascade's `dspy.Prediction`; `ArchEHRContract.predict` writes it and
`serve_response` answers from it. `ArchEHR2025Contract` adds `citations`.
"""

from __future__ import annotations

from typing import Any, TypedDict

import dspy


class ArchEHRRecord(TypedDict):
    case_id: str
    clinician_question: str
    question_candidates: list[dict[str, Any]] | None  # the learned stage's candidates, the pick first, with the
                                            # rerank's parts (None: a stage that writes one question)
    evidence_ids: list[str]
    scores: dict[str, int] | None          # Likert 1-5 per note sentence (None: the stage fell back before scoring)
    selection: str                          # how evidence_ids were chosen: strict | lenient | first_n | top_share | ...
    answer: str | None                      # None: the case has no note (a Subtask-1-only release)
    alignment: list[dict[str, Any]]         # [{answer_id, evidence_id: [ids]}]
    alignment_source: str | None            # reference (the input's <answer_sentences>) | generated
    answer_sentences: list[dict[str, str]]  # [{id, text}] of what was aligned
    grounding: list[dict[str, Any]] | None  # a verdict per answer sentence (None: no grounding check)
    dropped_ids: int                        # unknown note ids removed from the alignment
    fallbacks: dict[str, str]               # stage -> why its documented fallback answered
    degenerate: dict[str, str] | None       # stage -> why its reply, though it parsed, said nothing (every score
                                            # equal, no citation at all); absent in older runs
    repairs: dict[str, int]                 # stage -> outputs whose leaked markup was stripped
    usage: dict[str, dict[str, float]]      # stage -> LM calls, tokens, retries, seconds
    seconds: float


FIELDS: tuple[str, ...] = tuple(k for k in ArchEHRRecord.__annotations__ if k != "seconds")


def record_of(pred: dspy.Prediction, seconds: float) -> ArchEHRRecord:
    """The record of one cascade prediction (every field present; `seconds` rounded to 0.1 ms)."""
    return ArchEHRRecord(**{k: pred.get(k) for k in FIELDS}, seconds=round(seconds, 4))  # type: ignore[typeddict-item]
