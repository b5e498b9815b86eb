import json

import pytest

from tasks.archehr.data import ArchEHRDataError
from tasks.archehr.submission import read_submission, write_submissions

pytestmark = pytest.mark.unit


def record(cid, answer="A."):
    return {"case_id": cid, "clinician_question": "Q?", "evidence_ids": ["1"], "answer": answer,
            "alignment": [{"answer_id": "1", "evidence_id": ["1"]}]}


def test_submission_files_follow_the_official_format(tmp_path):
    paths = write_submissions([record("1"), record("121", answer=None)], tmp_path)
    sub = {st: json.loads(p.read_text()) for st, p in paths.items()}
    assert sub[1] == [{"case_id": "1", "prediction": "Q?"}, {"case_id": "121", "prediction": "Q?"}]
    assert sub[2] == [{"case_id": "1", "prediction": ["1"]}]  # the note-less case has Subtask 1 only
    assert sub[3] == [{"case_id": "1", "prediction": "A."}]
    assert sub[4] == [{"case_id": "1", "prediction": [{"answer_id": "1", "evidence_id": ["1"]}]}]
    assert read_submission(paths[4], 4) == {"1": [{"answer_id": "1", "evidence_id": ["1"]}]}


def test_wrong_submission_shapes_are_rejected(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"case_id": "1", "prediction": [1, 2]}]))
    with pytest.raises(ArchEHRDataError, match="wrong shape for subtask 2"):
        read_submission(path, 2)
    path.write_text("{")
    with pytest.raises(ArchEHRDataError, match="cannot read submission"):
        read_submission(path, 1)
    path.write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError traceback before
    with pytest.raises(ArchEHRDataError, match=r"cannot read submission \(JSON nested too deeply to read\)"):
        read_submission(path, 1)
