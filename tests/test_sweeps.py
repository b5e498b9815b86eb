"""Sweep reports from multirun folders, and a real 2-job Hydra multirun."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT


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
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "task=sweep_report", f"dir={tmp_path}",
                           f"hydra.run.dir={tmp_path / 'report'}"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-1500:]
    table = (tmp_path / "sweep_report.md").read_text().splitlines()
    assert table[0].startswith("| job | program.eval.avg_threshold | program.eval.min_threshold | data.limit | objective")
    assert "| 3 | 3.8000 | 3 | 5 | 0.7000 |" in table[-1]
    png = tmp_path / "sweep_heatmap.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "sweep_report.csv").read_text().count("\n") == 5


def test_sweep_report_without_jobs_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "task=sweep_report", f"dir={tmp_path}",
                           f"hydra.run.dir={tmp_path / 'r'}"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: no */scores.json under {tmp_path}"


@pytest.mark.embedded_lm
def test_two_job_multirun_returns_the_metric_and_reports(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "-m", "program=archehr", "data.limit=1",
                           "program.evidence.strict_threshold=4,5", f"cache_dir={tmp_path / 'cache'}",
                           "progress=false", f"hydra.sweep.dir={sweep}"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    objectives = [json.loads((sweep / str(i) / "scores.json").read_text())["objective"] for i in (0, 1)]
    assert all(isinstance(o, float) for o in objectives)
    report = subprocess.run([sys.executable, str(ROOT / "main.py"), "task=sweep_report", f"dir={sweep}",
                             f"hydra.run.dir={tmp_path / 'r'}"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert report.returncode == 0, report.stderr[-1500:]
    assert (sweep / "sweep_program_evidence_strict_threshold.png").is_file()
