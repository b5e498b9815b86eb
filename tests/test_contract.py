"""The program contract as the runner uses it: inputs, LM roles, scoring records and files, no-LM behaviour."""

import json
import shutil
from pathlib import Path

import pytest

from common.errors import ConfigError
from runners.program import choose_lm_or_no_lm, contract_for
from tests.builders import config
from tests.conftest import BUNDLED_KEY, ROOT

pytestmark = pytest.mark.unit

FIXTURE_SUBMISSION = ROOT / "tests" / "fixtures" / "archehr_submission"


def perfect_records(inputs):
    key = inputs.references["key"]
    return [{"case_id": c.case_id, "clinician_question": c.clinician_question,
             "evidence_ids": sorted(key[c.case_id].essential), "answer": key[c.case_id].answer_without_citations,
             "alignment": [{"answer_id": aid, "evidence_id": cites} for aid, _, cites in key[c.case_id].answer_sentences],
             "alignment_source": "reference"} for c in inputs.items]


def test_gold_records_score_100_where_the_official_metric_is_exact():
    cfg = config("metrics.bertscore=null")
    contract = contract_for(cfg)
    inputs = contract.load(cfg)
    assert Path(inputs.references["key_path"]).resolve() == BUNDLED_KEY  # data.key=auto: the key beside the cases
    scores = contract.score(cfg, inputs, perfect_records(inputs))
    assert scores["subtask_1"]["rougeLsum"] == pytest.approx(100)
    assert scores["subtask_2"]["strict_micro_f1"] == pytest.approx(100)
    assert scores["subtask_3"]["rougeLsum"] == pytest.approx(100)
    assert scores["subtask_4"]["micro_f1"] == pytest.approx(100)
    overall = [scores[f"subtask_{i}"]["overall_score"] for i in (1, 2, 3, 4)]
    assert scores["objective"] == pytest.approx(sum(overall) / 4)


def test_an_invalid_submission_file_fails_its_subtask_only(tmp_path):
    folder = tmp_path / "subs"
    shutil.copytree(FIXTURE_SUBMISSION, folder)
    (folder / "submission_subtask_3.json").write_text(json.dumps([{"case_id": "901", "prediction": 5}]))
    cfg = config("metrics.bertscore=null")
    contract = contract_for(cfg)
    scores = contract.score_files(cfg, contract.load(cfg), str(folder))
    assert "wrong shape for subtask 3" in scores["subtask_3"]["invalid"]
    assert scores["subtask_2"]["strict_micro_f1"] == pytest.approx(800 / 9)  # the others are scored as before
    assert scores["objective"] == pytest.approx(sum(scores[f"subtask_{i}"]["overall_score"] for i in (1, 2, 4)) / 3)


def test_lm_roles_follow_the_stage_choices():
    assert contract_for(cfg := config("lm=embedded")).lm_roles(cfg) == ["question", "evidence", "answer", "alignment"]
    assert contract_for(cfg := config()).lm_roles(cfg) == []  # lm=none: the non-LLM implementations
    cfg = config("lm=embedded", "program/archehr/evidence=embedding", "program/archehr/answer=extractive")
    assert contract_for(cfg).lm_roles(cfg) == ["question", "alignment"]


def test_without_an_lm_archehr_runs_its_no_lm_stages_and_mediqa_says_what_to_choose(capsys):
    cfg = config("lm=none")
    assert choose_lm_or_no_lm(cfg, contract_for(cfg)) == []
    assert contract_for(cfg).stage_choices(cfg) == {"question": "finetuned", "evidence": "learned", "answer": "extractive",
                                                    "alignment": "learned"}
    assert capsys.readouterr().out.startswith("no LM chosen: program=archehr runs every stage without an LM")
    cfg = config("program=mediqa_corr", "lm=none")
    with pytest.raises(ConfigError, match=r"program=mediqa_corr needs an LM and none is chosen: add lm=gemini"):
        choose_lm_or_no_lm(cfg, contract_for(cfg))
