"""Experiment tracking (MLflow, a temporary SQLite store) and parallel multiruns on Hydra launchers (joblib,
submitit_local), offline with the non-LLM program."""

import json
import subprocess
import sys

import pytest

from tests.cli import run_main
from tests.conftest import ROOT


def main(*args, env=None, timeout=900):
    return run_main(*args, env=env, timeout=timeout, quiet=True)


def test_a_run_and_a_two_job_multirun_are_logged_to_mlflow(tmp_path):
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    track = ("tracking=mlflow", f"tracking.uri={uri}", f"tracking.artifact_location={tmp_path / 'artifacts'}")
    single = main("program=archehr", *track, f"hydra.run.dir={tmp_path / 'run'}")
    assert single.returncode == 0, single.stderr[-1500:]
    assert "tracking: logged to MLflow run" in single.stdout
    sweep = main("-m", "program=archehr", "program.evidence.top_share=0.3,0.6", *track,
                 f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert sweep.returncode == 0, sweep.stderr[-1500:]
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["clinprog-archehr"])
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    single_run = runs[runs["tags.mlflow.parentRunId"].isna() & runs["metrics.scores.objective"].notna()]
    assert len(single_run) == 1
    assert single_run["metrics.scores.objective"].iloc[0] == pytest.approx(scores["objective"])
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(children) == 2 and children["tags.mlflow.parentRunId"].nunique() == 1
    assert set(children["params.program.evidence.top_share"]) == {"0.3", "0.6"}
    job = json.loads((tmp_path / "sweep" / "1" / "scores.json").read_text())
    assert sorted(children["metrics.scores.objective"]) == pytest.approx(sorted(
        [json.loads((tmp_path / "sweep" / str(i) / "scores.json").read_text())["objective"] for i in (0, 1)]))
    assert job["objective"] in list(children["metrics.scores.objective"])
    artifacts = mlflow.artifacts.list_artifacts(run_id=single_run["run_id"].iloc[0])
    assert {"report.html", "submission_subtask_2.json", "scores.json"} <= {a.path for a in artifacts}


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_a_two_by_two_sweep_runs_in_parallel_on_a_launcher_and_is_reported(tmp_path, launcher):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher" if launcher == "joblib"
                        else "hydra_plugins.hydra_submitit_launcher")
    sweep = tmp_path / "sweep"
    extra = ["hydra.launcher.n_jobs=2"] if launcher == "joblib" else ["hydra.launcher.timeout_min=20",
                                                                     "hydra.launcher.tasks_per_node=1"]
    proc = main("-m", f"hydra/launcher={launcher}", *extra, "program=archehr",
                "program.evidence.top_share=0.3,0.6", "program.alignment.threshold=0.3,0.5",
                f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'cache'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    objectives = [json.loads((sweep / str(i) / "scores.json").read_text())["objective"] for i in range(4)]
    assert len(set(objectives)) > 1  # the four jobs ran different configurations
    report = main("task=sweep_report", f"dir={sweep}", f"hydra.run.dir={tmp_path / 'r'}")
    assert report.returncode == 0, report.stderr[-1500:]
    assert (sweep / "sweep_heatmap.png").is_file() and (sweep / "sweep_report.html").is_file()


def test_the_dspy_disk_cache_is_safe_for_parallel_jobs(tmp_path):
    """Two processes write 300 entries each into one DSPy cache directory at once; every entry reads back."""
    script = f"""
import sys, dspy
from dspy.clients.cache import Cache
cache = Cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir={str(tmp_path / 'cache')!r})
tag = sys.argv[1]
for i in range(300):
    cache.put({{"model": "m", "messages": tag + str(i)}}, tag + "-" + str(i))
missing = [i for i in range(300) if cache.get({{"model": "m", "messages": tag + str(i)}}) != tag + "-" + str(i)]
print(len(missing))
"""
    procs = [subprocess.Popen([sys.executable, "-c", script, tag], stdout=subprocess.PIPE, text=True, cwd=ROOT)
             for tag in ("a", "b")]
    assert [p.communicate(timeout=300)[0].strip() for p in procs] == ["0", "0"]
    read_only = script.replace("for i in range(300):\n    cache.put", "for i in []:\n    cache.put")
    check = subprocess.run([sys.executable, "-c", read_only, "a"], capture_output=True, text=True, cwd=ROOT)
    assert check.stdout.strip() == "0"  # the other process's writes did not clobber these
