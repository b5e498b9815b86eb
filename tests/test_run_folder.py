"""Run folders never mix or lose results: torn lines, hand-broken lines, locks, fingerprints, Ctrl-C, foreign keys."""

import json
import logging

import pytest

from common.errors import ConfigError, RunFolderError
from common.prediction_log import PredictionLog, PredictionLogError
from common.run_folder import RunFolder
from tests.cli import QUIET, dispatch_run, run_main
from tests.conftest import BUNDLED_KEY, ROOT

pytestmark = pytest.mark.unit

DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"


def log_at(tmp_path):
    return PredictionLog(tmp_path / "predictions.jsonl", key=lambda r: r["case_id"])


def test_a_torn_last_line_is_set_aside_and_the_next_record_starts_its_own_line(tmp_path):
    log = log_at(tmp_path)
    log.append({"case_id": "1"})
    with log.path.open("a") as fh:
        fh.write('{"case_id": "2", "clini')  # a run killed mid-write
    assert list(log.read()) == ["1"]
    assert (tmp_path / "predictions.jsonl.torn").read_text() == '{"case_id": "2", "clini\n'
    log.append({"case_id": "2"})
    assert [json.loads(line)["case_id"] for line in log.path.read_text().splitlines()] == ["1", "2"]


def test_a_complete_last_record_without_its_newline_is_kept(tmp_path):
    log = log_at(tmp_path)
    log.path.write_text('{"case_id": "1"}\n{"case_id": "2"}')
    assert list(log.read()) == ["1", "2"]
    log.append({"case_id": "3"})
    assert len(log.path.read_text().splitlines()) == 3


def test_a_hand_broken_line_is_one_error_naming_file_and_line(tmp_path):
    log = log_at(tmp_path)
    log.path.write_text('{"case_id": "1"}\nnot json\n{"case_id": "3"}\n')
    with pytest.raises(PredictionLogError, match=r"predictions.jsonl:2: not a JSON record"):
        log.read()
    log.path.write_text('{"other": 1}\n')
    with pytest.raises(PredictionLogError, match=r"predictions.jsonl:1: record without its id field"):
        log.read()
    log.path.write_text('{"case_id": "1"}\n' + "[" * 100_000 + "]" * 100_000 + '\n{"case_id": "3"}\n')  # a traceback before
    with pytest.raises(PredictionLogError, match=r"predictions.jsonl:2: not a JSON record \(JSON nested too deeply"):
        log.read()


def test_a_changed_fingerprint_refuses_restarts_or_forces(tmp_path):
    with RunFolder(tmp_path, {"program": {"align_threshold": 0.5}}) as folder:
        folder.predictions.write_text('{"case_id": "1"}\n')
    with pytest.raises(RunFolderError, match=r"program.align_threshold: 0.5 -> 0.95.*run.resume=restart"):
        with RunFolder(tmp_path, {"program": {"align_threshold": 0.95}}):
            pass
    with RunFolder(tmp_path, {"program": {"align_threshold": 0.95}}, resume="force") as folder:
        assert folder.predictions.exists()
    with RunFolder(tmp_path, {"program": {"align_threshold": 0.5}}, resume="restart") as folder:
        assert not folder.predictions.exists()
        assert len(list(tmp_path.glob("previous/*/predictions.jsonl"))) == 1


# the baseline question stage: what these tests check is the run folder, not the questions
BASELINE = ("program/archehr/question=baseline", *QUIET)


def test_rerun_with_a_changed_config_refuses_in_one_line_then_restarts(tmp_path, caplog):
    out = tmp_path / "run"
    # processes: Hydra writes .hydra/*.yaml, and its callback puts them back when the rerun is refused
    assert run_main(*BASELINE, "data.limit=2", f"hydra.run.dir={out}").returncode == 0
    first = (out / "predictions.jsonl").read_text()
    hydra_files = {name: (out / ".hydra" / name).read_bytes() for name in ("config.yaml", "hydra.yaml", "overrides.yaml")}
    again = run_main(*BASELINE, "data.limit=2", "program.alignment.threshold=0.95", f"hydra.run.dir={out}")
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [again.stderr.strip()]  # one line
    assert "program.alignment.threshold: None -> 0.95" in again.stderr and "run.resume=restart" in again.stderr
    assert (out / "predictions.jsonl").read_text() == first  # nothing stale was served or lost
    # the folder still describes the run whose predictions it holds
    assert {name: (out / ".hydra" / name).read_bytes() for name in hydra_files} == hydra_files
    restarted = dispatch_run(*BASELINE, "data.limit=2", "program.alignment.threshold=0.95", "run.resume=restart",
                             f"hydra.run.dir={out}")
    assert restarted.returncode == 0, restarted.stderr[-1500:]
    assert (out / "predictions.jsonl").read_text() != first
    caplog.set_level(logging.INFO)
    same = dispatch_run(*BASELINE, "data.limit=2", "program.alignment.threshold=0.95", f"hydra.run.dir={out}")
    assert same.returncode == 0 and "resuming: 2 cases already in" in caplog.text


def test_own_cases_without_a_key_never_take_the_bundled_one(tmp_path):
    # the bundled cases under another name: the same ids (901-903), but no key belongs to them
    own = tmp_path / "my_cases.xml"
    own.write_bytes((ROOT / "data" / "archehr" / "bundled_cases.xml").read_bytes())
    out = tmp_path / "run"
    proc = dispatch_run(*BASELINE, f"data.cases={own}", f"hydra.run.dir={out}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    for name in ("predictions.jsonl", "usage.json", "report.md", "config.json", "submission_subtask_2.json"):
        assert (out / name).is_file(), name
    scores = json.loads((out / "scores.json").read_text())  # subtask 1 only: the XML holds clinician questions
    assert [scores[f"subtask_{i}"].get("unavailable", "") for i in (2, 3, 4)] == ["no key for these cases (data.key)"] * 3
    foreign = dispatch_run(*BASELINE, f"data.cases={DEV_CASES}", f"data.key={BUNDLED_KEY}",
                           f"hydra.run.dir={tmp_path / 'foreign'}")
    assert foreign.returncode == 2 and "the key does not belong to the cases" in foreign.stderr
    assert not (tmp_path / "foreign" / "predictions.jsonl").exists()  # refused before any case ran


@pytest.mark.parametrize("program", ["archehr", "archehr2025", "mediqa_corr"])
@pytest.mark.parametrize("task", ["run", "evaluate"])
@pytest.mark.parametrize("limit", ["abc", "-1", "0", "1.5", "true"])
def test_data_limit_must_be_a_positive_integer_or_null(program, task, limit):
    from common.config_groups import compose_config
    from runners import program as runner

    cfg = compose_config(f"program={program}", f"task={task}", f"data.limit={limit}",
                         f"++data.submissions={ROOT / 'nowhere'}")
    with pytest.raises(ConfigError, match=r"^data.limit must be an integer >= 1 or null \(the first N \w+s; null: every "):
        getattr(runner, task)(cfg)


def test_bad_data_limit_and_a_run_dir_that_is_a_file_are_one_error_line(tmp_path):
    a_file = tmp_path / "results.txt"
    a_file.write_text("mine")
    limit = dispatch_run(*BASELINE, "data.limit=abc", f"hydra.run.dir={tmp_path / 'run'}")
    assert limit.returncode == 2 and limit.stderr == ("error: data.limit must be an integer >= 1 or null (the first N "
                                                      "cases; null: every case), not 'abc'\n")
    proc = run_main(*BASELINE, f"hydra.run.dir={a_file}")  # Hydra's callback refuses it
    assert proc.returncode == 2 and proc.stderr == (f"error: hydra.run.dir={a_file} is a file, not a folder; choose "
                                                    "a folder for the run's outputs\n")
    assert a_file.read_text() == "mine"
