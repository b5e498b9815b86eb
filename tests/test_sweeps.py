"""Sweep reports from multirun folders (a real Hydra multirun: tests/test_multirun_failures.py)."""

import json

import pytest
import yaml

from tests.cli import dispatch_run

pytestmark = pytest.mark.unit


def fake_multirun(root, grid):
    for i, (avg, mn, objective) in enumerate(grid):
        job = root / str(i)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(
            [f"program.eval.avg_threshold={avg}", f"program.eval.min_threshold={mn}", "data.limit=5"]))
        (job / "scores.json").write_text(json.dumps({"objective": objective, "error_flag_accuracy": objective / 2,
                                                     "unavailable": {"bleurt": "no checkpoint"}}))


def test_sweep_report_table_and_heatmap(tmp_path):
    grid = [(3.5, 2, 0.4), (3.5, 3, 0.5), (3.8, 2, 0.6), (3.8, 3, 0.7)]
    fake_multirun(tmp_path, grid)
    proc = dispatch_run("task=sweep_report", f"dir={tmp_path}",
                        f"hydra.run.dir={tmp_path / 'report'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    table = (tmp_path / "sweep_report.md").read_text().splitlines()
    assert table[0] == "fixed in every job: data.limit=5"
    assert table[2] == "| job | program.eval.avg_threshold | program.eval.min_threshold | objective | error_flag_accuracy |"
    assert "| 3 | 3.8000 | 3 | 0.7000 | 0.3500 |" in table[-1]
    png = tmp_path / "sweep_heatmap.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "sweep_report.csv").read_text().count("\n") == 5


def test_sweep_report_names_the_jobs_that_failed(tmp_path):
    fake_multirun(tmp_path, [(3.5, 2, 0.4), (3.8, 3, 0.7)])
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "failed.json").write_text(json.dumps({"job": 2, "overrides": ["program.eval.avg_threshold=9"],
                                                            "error": "error: program.eval.avg_threshold must be ..."}))
    proc = dispatch_run("task=sweep_report", f"dir={tmp_path}", f"hydra.run.dir={tmp_path / 'report'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    table = (tmp_path / "sweep_report.md").read_text().splitlines()
    assert table[-2:] == ["1 of 3 jobs failed (not in the table):",
                          "- job 2 (program.eval.avg_threshold=9) failed: program.eval.avg_threshold must be ..."]
    assert "2 jobs scored, 1 failed" in (tmp_path / "sweep_report.html").read_text()


def test_sweep_report_says_when_the_objective_did_not_move(tmp_path):
    fake_multirun(tmp_path, [(3.5, 2, 0.4), (3.8, 3, 0.4)])
    proc = dispatch_run("task=sweep_report", f"dir={tmp_path}", f"hydra.run.dir={tmp_path / 'report'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    said = "objective is 0.4 in every job: the swept settings do not change what it measures on these inputs"
    assert (tmp_path / "sweep_report.md").read_text().splitlines()[-1].startswith(said)
    assert said in (tmp_path / "sweep_report.html").read_text()
    moved = tmp_path / "moved"
    fake_multirun(moved, [(3.5, 2, 0.4), (3.8, 3, 0.5)])
    dispatch_run("task=sweep_report", f"dir={moved}", f"hydra.run.dir={tmp_path / 'report2'}")
    assert "do not change what it measures" not in (moved / "sweep_report.md").read_text()


def test_sweep_report_without_jobs_is_one_line(tmp_path):
    proc = dispatch_run("task=sweep_report", f"dir={tmp_path}",
                        f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: no */scores.json under {tmp_path}"


# the stages a DSPy compile of the non-LLM program keeps as they are (the learned ones would be fitted instead)
SIMILARITY_STAGES = ("program/archehr/evidence=embedding", "program/archehr/alignment=similarity",
                     "program/archehr/question=baseline")


def test_compile_from_the_cli_scores_before_and_after_and_saves_the_state(tmp_path):
    save_to = tmp_path / "compiled" / "archehr_none.json"
    proc = dispatch_run("program=archehr", "task=compile", "optimizer=none",
                        "optimizer.metric=archehr_evidence", f"program.optimize.save_to={save_to}", *SIMILARITY_STAGES,
                        f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    # the no-LM program on the 3 bundled cases: Subtask 2 strict F1 per case, averaged (0-1)
    run = dispatch_run("program=archehr", "metrics.bertscore=null",
                       *SIMILARITY_STAGES,
                       f"hydra.run.dir={tmp_path / 'plain'}")
    per_case = json.loads((tmp_path / "plain" / "scores.json").read_text())["subtask_2"]["strict_macro_f1"] / 100
    assert scores["before"] == scores["after"] == pytest.approx(per_case)
    meta = json.loads(save_to.with_name(save_to.name + ".meta.json").read_text())
    assert meta["program"] == "ArchEHRCascade" and meta["metric"] == "archehr_evidence" and run.returncode == 0
    assert "<td><bdi>before</bdi></td>" in (tmp_path / "run" / "compile_report.html").read_text()
