"""Experiment tracking (MLflow, a temporary SQLite store) and parallel multiruns on Hydra launchers (joblib,
submitit_local), offline with the non-LLM program."""

import json

import pytest

from tests.cli import dispatch_run, run_main

pytestmark = pytest.mark.integration
# the baseline question stage unless a test names one: each launcher job is a process that builds its program
BASELINE = "program/archehr/question=baseline"


def test_a_run_and_a_two_job_joblib_multirun_are_logged_to_mlflow(tmp_path):
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    track = ("tracking=mlflow", f"tracking.uri={uri}", f"tracking.artifact_location={tmp_path / 'artifacts'}")
    single = dispatch_run("program=archehr", BASELINE, *track, f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert single.returncode == 0, single.stderr[-1500:]
    assert "tracking: logged to MLflow run" in single.stdout
    # the joblib launcher's multirun (the basic launcher's is tests/test_sweeps.py, submitit's below)
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = run_main("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "program=archehr", BASELINE,
                     "program/archehr/evidence=embedding", "program.evidence.top_share=0.3,0.6", *track,
                     f"hydra.sweep.dir={tmp_path / 'sweep'}", quiet=True)
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


def test_a_two_job_sweep_runs_on_the_submitit_launcher_and_is_reported(tmp_path):
    """Each job a process of its own (submitit_local); the 2 x 2 grid's heatmap is tests/test_sweeps.py's (the
    report reads the same files whichever launcher wrote them)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep = tmp_path / "sweep"
    extra = ["hydra.launcher.timeout_min=20", "hydra.launcher.tasks_per_node=1"]
    proc = run_main("-m", "hydra/launcher=submitit_local", *extra, "program=archehr", BASELINE,
                    "program/archehr/evidence=embedding", "program.evidence.top_share=0.1,0.9",
                    "data.limit=1",   # 2 job processes: one case each
                    f"hydra.sweep.dir={sweep}", f"cache_dir={tmp_path / 'cache'}", quiet=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = [json.loads((sweep / str(i) / "scores.json").read_text()) for i in range(2)]
    # a larger share selects more sentences: each job ran its own configuration
    assert jobs[0]["subtask_2"]["strict_micro_recall"] < jobs[1]["subtask_2"]["strict_micro_recall"]
    report = dispatch_run("task=sweep_report", f"dir={sweep}", f"hydra.run.dir={tmp_path / 'r'}")
    assert report.returncode == 0, report.stderr[-1500:]
    assert (sweep / "sweep_program_evidence_top_share.png").is_file() and (sweep / "sweep_report.html").is_file()


def test_parallel_lm_jobs_share_one_dspy_cache_and_a_rerun_makes_no_lm_call(tmp_path):
    """Two joblib jobs of an LM program write one cache_dir at once (clinprog's configure_dspy); rerunning them
    reaches the LM server zero times: every entry both jobs wrote reads back."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    from tests.cli import fake_openai_server

    def reply(message: str) -> str:
        return json.dumps({"clinician_question": "Why was the patient admitted?"})

    with fake_openai_server(reply) as server:
        args = ("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "program=archehr", "lm=openai_compatible",
                "lm.client.model=m", f"lm.client.api_base={server['api_base']}", "stages=no_lm",
                "program/archehr/question=lm", "program.question.max_words=10,12", f"cache_dir={tmp_path / 'cache'}")
        first = run_main(*args, f"hydra.sweep.dir={tmp_path / 's1'}", quiet=True)
        assert first.returncode == 0, first.stderr[-1500:]
        calls = len(server["requests"])
        assert calls >= 2 * 3  # each job asked the LM for each of the 3 bundled cases
        again = run_main(*args, f"hydra.sweep.dir={tmp_path / 's2'}", quiet=True)
        assert again.returncode == 0, again.stderr[-1500:]
        assert len(server["requests"]) == calls  # served from the shared cache: no request reached the server
