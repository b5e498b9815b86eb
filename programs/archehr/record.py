"""One ArchEHR prediction as written to predictions.jsonl: the typed record run, evaluate, serve and the reports read.
`ArchEHR2025Contract` adds `citations`."""

from __future__ import annotations

from typing import Any, TypedDict

import dspy


class ArchEHRRecord(TypedDict):
    case_id: str
    clinician_question: str
    question_candidates: list[dict[str, Any]] | None  # the learned stage's, the pick first (else None)
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
    degenerate: dict[str, str] | None       # stage -> why its reply, though it parsed, said nothing
    repairs: dict[str, int]                 # stage -> outputs whose leaked markup was stripped
    usage: dict[str, dict[str, float]]      # stage -> LM calls, tokens, retries, seconds
    seconds: float


FIELDS: tuple[str, ...] = tuple(k for k in ArchEHRRecord.__annotations__ if k != "seconds")


def record_of(pred: dspy.Prediction, seconds: float) -> ArchEHRRecord:
    """The record of one cascade prediction (every field present; `seconds` rounded to 0.1 ms)."""
    return ArchEHRRecord(**{k: pred.get(k) for k in FIELDS}, seconds=round(seconds, 4))  # type: ignore[typeddict-item]


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _objects(value: Any, name: str, fields: dict[str, str], optional: dict[str, str] | None = None) -> str | None:
    """Why `value` is not a list of objects holding `fields` ({name: "id" | "text" | "ids" | "list"}; `optional`
    ones may be absent), or None."""
    if not isinstance(value, list):
        return f"{name} is not a list"
    check = {"id": _is_id, "text": lambda v: isinstance(v, str), "list": lambda v: isinstance(v, list),
             "ids": lambda v: isinstance(v, list) and all(_is_id(i) for i in v)}
    says = {"id": "an id", "text": "a string", "list": "a list", "ids": "a list of ids"}
    for n, entry in enumerate(value, 1):
        if not isinstance(entry, dict):
            return f"{name} entry {n} is not an object"
        for key, kind in {**fields, **(optional or {})}.items():
            if key not in entry and key in (optional or {}):
                continue
            if key not in entry:
                return f"{name} entry {n} lacks {key}"
            if not check[kind](entry[key]):
                return f"{name} entry {n}: {key} is not {says[kind]}"
    return None


def record_problem(record: dict[str, Any]) -> str | None:
    """Why a saved record (maybe edited by hand) cannot make the submissions, scores and reports, or None: checked
    once where the records are read, so no writer meets a wrong shape halfway through its files. Fields only
    report.html shows are not checked: it reads odd ones as missing."""
    if not isinstance(record["clinician_question"], str):
        return "clinician_question is not a string"
    if record["answer"] is None:
        return None  # a case without a note: Subtask 1 only
    wrong = [f"{name} is not a {'string' if kind is str else 'list'}"
             for name, kind in {"answer": str, "evidence_ids": list, "alignment": list}.items()
             if not isinstance(record[name], kind)]
    if wrong:
        return ", ".join(wrong)
    checks = [
        None if all(_is_id(i) for i in record["evidence_ids"]) else "evidence_ids holds something not an id",
        _objects(record["alignment"], "alignment", {"answer_id": "id", "evidence_id": "ids"}),
        None if record.get("alignment_source") is None or isinstance(record["alignment_source"], str)
        else "alignment_source is not a string",
        None if record.get("answer_sentences") is None else
        _objects(record["answer_sentences"], "answer_sentences", {"id": "id", "text": "text"}),
        None if record.get("grounding") is None else
        _objects(record["grounding"], "grounding", {"verdict": "text"},
                 {"answer_id": "id", "support_ids": "ids", "reasons": "list", "text": "text"}),
    ]
    return next((c for c in checks if c), None)
