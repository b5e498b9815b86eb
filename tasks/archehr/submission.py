"""The four official ArchEHR-QA 2026 submission files: written from prediction records, read back for scoring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common import json_input
from tasks.archehr.data import ArchEHRDataError

SUBMISSION_FILES = {st: f"submission_subtask_{st}.json" for st in (1, 2, 3, 4)}


class SubmittedPredictions(dict):
    """{case_id: prediction} of a submission file, plus `entries`: every (case_id, prediction) in file order, which
    the scorers use (the official scripts score a case id written twice twice)."""

    def __init__(self, entries: list[tuple[str, Any]]) -> None:
        super().__init__(entries)
        self.entries = entries


def submissions_from_records(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    subs: dict[int, list[dict[str, Any]]] = {1: [], 2: [], 3: [], 4: []}
    for rec in records:
        cid = str(rec["case_id"])
        subs[1].append({"case_id": cid, "prediction": rec["clinician_question"]})
        if rec.get("answer") is None:
            continue  # a case without a note excerpt has Subtask 1 only
        subs[2].append({"case_id": cid, "prediction": [str(i) for i in rec["evidence_ids"]]})
        subs[3].append({"case_id": cid, "prediction": rec["answer"]})
        subs[4].append({"case_id": cid, "prediction": [
            {"answer_id": str(a["answer_id"]), "evidence_id": [str(e) for e in a["evidence_id"]]}
            for a in rec["alignment"]
        ]})
    return subs


def write_submissions(records: list[dict[str, Any]], out_dir: str | Path) -> dict[int, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for st, items in submissions_from_records(records).items():
        path = out_dir / SUBMISSION_FILES[st]
        path.write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths[st] = path
    return paths


def read_submission(path: str | Path, subtask: int) -> SubmittedPredictions:
    """An official submission file, its shape checked. A case id that is not a JSON string fails the file, as in the
    official scripts (it never equals the key's string ids)."""
    path = Path(path)
    try:
        items = json_input.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ArchEHRDataError(f"{path}: cannot read submission ({exc})") from None
    if not isinstance(items, list):
        raise ArchEHRDataError(f"{path}: a submission is a JSON array of {{case_id, prediction}}")
    entries: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or "case_id" not in item or "prediction" not in item:
            raise ArchEHRDataError(f"{path}: entry without case_id/prediction: {item!r}"[:300])
        pred, cid = item["prediction"], item["case_id"]
        if not isinstance(cid, str):
            raise ArchEHRDataError(
                f"{path}: case_id {json.dumps(cid)} is a JSON {type(cid).__name__}, not a string; the official "
                f"scorer compares case ids as strings and rejects this subtask (write \"case_id\": "
                f"{json.dumps(str(cid))})"[:400])
        ok = {
            1: isinstance(pred, str) and pred.strip(),
            2: isinstance(pred, list) and all(isinstance(x, str) for x in pred),
            3: isinstance(pred, str) and pred.strip(),
            4: isinstance(pred, list) and all(
                isinstance(a, dict) and isinstance(a.get("answer_id"), str) and isinstance(a.get("evidence_id"), list)
                and all(isinstance(e, str) for e in a["evidence_id"]) for a in pred),
        }[subtask]
        if not ok:
            raise ArchEHRDataError(f"{path}: case {cid}: prediction has the wrong shape for subtask {subtask}")
        entries.append((cid, pred))
    return SubmittedPredictions(entries)
