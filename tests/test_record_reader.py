"""One reader of a saved record (common/prediction_log.PredictionLog with the contract's `record_problem`), used by
every command that writes outputs from predictions.jsonl: `task=report`, a resumed run. A hand-edited record of the
wrong shape is one `error:` line naming the file, the line and what is wrong, before any output is rewritten
(issue 69: eight shapes crashed `task=report` after report.html was already rewritten, answers.md left stale)."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from common.config_groups import compose_config
from common.prediction_log import PredictionLog, PredictionLogError
from programs.archehr.contract import ArchEHRContract
from programs.mediqa_corr.contract import MediqaCorrContract
from tasks.archehr.data import load_cases
from tests.cli import dispatch_run, one_error_line
from tests.conftest import BUNDLED_CASES

pytestmark = pytest.mark.unit

CASE = load_cases(BUNDLED_CASES)[0]
SID = CASE.sentences[0].id
GOOD = {"case_id": CASE.case_id, "clinician_question": "Why?", "evidence_ids": [SID], "answer": "An answer.",
        "alignment": [{"answer_id": "1", "evidence_id": [SID]}], "alignment_source": "generated",
        "answer_sentences": [{"id": "1", "text": "An answer."}], "fallbacks": {}, "seconds": 0.1,
        "grounding": [{"answer_id": "1", "verdict": "supported", "reasons": [], "support_ids": [SID]}]}
# the eight shapes, each with what the error line says
BAD = [({"grounding": "x"}, "grounding is not a list"),
       ({"grounding": ["x"]}, "grounding entry 1 is not an object"),
       ({"alignment": "x"}, "alignment is not a list"),
       ({"alignment": [{"answer_id": "1"}]}, "alignment entry 1 lacks evidence_id"),
       ({"alignment": [{"answer_id": "1", "evidence_id": 3}]}, "alignment entry 1: evidence_id is not a list of ids"),
       ({"answer_sentences": "x"}, "answer_sentences is not a list"),
       ({"answer_sentences": [{"text": "a"}]}, "answer_sentences entry 1 lacks id"),
       ({"answer": ["a"], "alignment_source": "given"}, "answer is not a string")]


def run_folder(tmp_path, record: dict) -> None:
    cfg = compose_config("program=archehr", f"data.cases={BUNDLED_CASES}")
    (tmp_path / "config.json").write_text(json.dumps(OmegaConf.to_container(cfg, resolve=True)))
    (tmp_path / "usage.json").write_text(json.dumps(ArchEHRContract().usage([])))
    (tmp_path / "predictions.jsonl").write_text(json.dumps(GOOD) + "\n")


@pytest.mark.parametrize(("change", "says"), BAD)
def test_each_bad_shape_is_named_by_the_one_reader(tmp_path, change, says):
    path = tmp_path / "predictions.jsonl"
    path.write_text(json.dumps({**GOOD, "case_id": "other"}) + "\n" + json.dumps({**GOOD, **change}) + "\n")
    contract = ArchEHRContract()
    with pytest.raises(PredictionLogError) as err:
        PredictionLog(path, contract.record_id, contract.record_problem).read()
    assert str(err.value) == (f"{path}:2: the record of {CASE.case_id!r} cannot make the outputs ({says}); fix that "
                              "line, or delete it and rerun the run's command to run that case again")


def test_task_report_on_a_hand_edited_record_is_one_line_and_rewrites_nothing(tmp_path):
    run_folder(tmp_path, GOOD)
    first = dispatch_run("task=report", f"dir={tmp_path}", f"hydra.run.dir={tmp_path / 'h1'}", quiet=True)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {name: (tmp_path / name).read_bytes() for name in ("report.html", "report.md", "answers.md")}
    for change, says in BAD:
        (tmp_path / "predictions.jsonl").write_text(json.dumps({**GOOD, **change}) + "\n")
        run = dispatch_run("task=report", f"dir={tmp_path}", f"hydra.run.dir={tmp_path / 'h2'}", quiet=True)
        assert says in one_error_line(run) and "Traceback" not in run.stderr
        assert {name: (tmp_path / name).read_bytes() for name in before} == before  # nothing half-rewritten


def test_fields_only_the_report_shows_stay_lenient():
    """report.html reads `"seconds": "abc"` or a verdict without its text as missing (tests/test_input_refusals.py)."""
    record = {**GOOD, "seconds": "abc", "grounding": [{"answer_id": "1", "verdict": "contradicted", "reasons": ["r"]}]}
    assert ArchEHRContract().record_problem(record) is None
    assert ArchEHRContract().record_problem({**GOOD, "answer": None, "evidence_ids": None}) is None  # Subtask 1 only


@pytest.mark.parametrize(("change", "says"), [({"flag": "1"}, "flag is not 0 or 1"),
                                              ({"sentence_id": "x"}, "sentence_id is not an integer"),
                                              ({"corrected": None}, "corrected is not a string"),
                                              ({"text_id": "Note_1"}, "text_id: the id 'Note_1' is outside")])
def test_a_mediqa_record_that_makes_no_submission_line_is_named(change, says):
    record = {"text_id": "ms-val-0", "flag": 1, "sentence_id": 2, "corrected": "Fixed.", **change}
    assert says in (MediqaCorrContract().record_problem(record) or "")
    assert MediqaCorrContract().record_problem({**record, **{k: v for k, v in [("flag", 0), ("sentence_id", -1),
                                                                                ("corrected", "NA"),
                                                                                ("text_id", "ms-val-0")]}}) is None
