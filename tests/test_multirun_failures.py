"""A multirun whose second job fails (issue #28 item 4): the third job still runs, every finished job's folder is
complete, the failed job's main.log says why, and the sweep ends in one `error:` line for that job naming its
overrides and a non-zero exit code, on the basic launcher and on joblib's (whose jobs run in worker processes). And a
2-job multirun that works, with its sweep report."""

import json

import pytest

from tests.cli import dispatch_run, run_main

pytestmark = pytest.mark.integration

# tiny runs: one case, no BERTScore model, no progress bars; threshold 7 is refused by the evidence stage
TINY = ("program=archehr", "data.limit=1", "program/archehr/question=baseline")
BAD = "program.evidence.threshold must be a number in [0, 1] or null (the fitted value), not 7"
LAUNCHERS = {"basic": (), "joblib": ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")}


def assert_complete(job):
    names = {p.name for p in job.iterdir()}
    assert {"predictions.jsonl", "scores.json", "report.html", "report.md", "config.json", "main.log",
            *(f"submission_subtask_{i}.json" for i in (1, 2, 3, 4))} <= names, sorted(names)
    assert "failed.json" not in names
    assert len((job / "predictions.jsonl").read_text().splitlines()) == 1
    assert isinstance(json.loads((job / "scores.json").read_text())["objective"], float)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failing_job_leaves_the_others_finished_and_the_sweep_reports_it(tmp_path, launcher):
    if launcher == "joblib":
        pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = tmp_path / "sweep"
    proc = run_main("-m", *LAUNCHERS[launcher], *TINY, "program.evidence.threshold=0.3,7,0.5",
                    f"hydra.sweep.dir={sweep}", quiet=True)
    assert_complete(sweep / "0")
    assert_complete(sweep / "2")  # the job after the failed one ran
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: multirun job #1 (program.evidence.threshold=7) failed: {BAD} (its folder: {sweep / '1'})"]
    assert "1 of 3 multirun jobs failed" in proc.stderr
    assert "Traceback" not in proc.stderr
    failed = sweep / "1"
    assert not (failed / "scores.json").exists() and not (failed / "predictions.jsonl").exists()
    assert (failed / "main.log").read_text().splitlines()[-1] == f"error: {BAD}"
    marker = json.loads((failed / "failed.json").read_text())
    assert marker["job"] == 1 and "program.evidence.threshold=7" in marker["overrides"]
    assert all((sweep / str(i) / ".hydra" / "overrides.yaml").is_file() for i in (0, 1, 2))
    if launcher == "basic":
        # rerun into the same sweep folder with values that all work: the old failure is not reported again
        again = run_main("-m", *TINY, "program.evidence.threshold=0.3,0.5", f"hydra.sweep.dir={sweep}", quiet=True)
        assert again.returncode == 0, again.stderr[-3000:]
        assert not [line for line in again.stderr.splitlines() if line.startswith("error:")]
        assert_complete(sweep / "1")  # the folder that failed before now holds the rerun's (threshold 0.5) outputs


def test_a_single_run_still_exits_2_and_leaves_no_folder(tmp_path):
    """Outside a multirun nothing changed: one error line, exit 2, the near-empty run folder removed."""
    proc = dispatch_run(*TINY, "program.evidence.threshold=7", f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"error: {BAD}"
    assert not (tmp_path / "run").exists()


def test_two_job_multirun_returns_each_jobs_objective_and_reports_them(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_main("-m", "program=archehr", "program/archehr/question=baseline", "metrics.bertscore=null",
                    "program/archehr/evidence=embedding", "program.evidence.top_share=0.1,0.9", "progress=false",
                    f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = [json.loads((sweep / str(i) / "scores.json").read_text()) for i in (0, 1)]
    for scores in jobs:  # the objective is the mean of the subtask overall scores
        overall = [scores[f"subtask_{i}"]["overall_score"] for i in (1, 2, 3, 4)]
        assert scores["objective"] == pytest.approx(sum(overall) / 4)
    # a larger share selects more sentences: the swept value reached the program
    assert jobs[0]["subtask_2"]["strict_micro_recall"] < jobs[1]["subtask_2"]["strict_micro_recall"]
    report = dispatch_run("task=sweep_report", f"dir={sweep}", f"hydra.run.dir={tmp_path / 'r'}")
    assert report.returncode == 0, report.stderr[-1500:]
    header, _, *rows = [r for r in (sweep / "sweep_report.md").read_text().splitlines() if r.startswith("|")]
    columns = [c.strip() for c in header.split("|")]
    cells = [[c.strip() for c in r.split("|")] for r in rows]
    share, objective = columns.index("program.evidence.top_share"), columns.index("objective")
    assert [r[share] for r in cells] == ["0.1000", "0.9000"]
    assert [float(r[objective]) for r in cells] == pytest.approx([j["objective"] for j in jobs], abs=1e-4)
    assert (sweep / "sweep_program_evidence_top_share.png").is_file()
    # every subtask that varies across the jobs has a column (not only the first 8 metrics, all of Subtask 1)
    # (Subtasks 1 and 4 do not depend on the evidence share: constant, so in the CSV only)
    assert columns[objective:objective + 3] == ["objective", "subtask_2.overall_score", "subtask_3.overall_score"]
    assert all(len({r[columns.index(c)] for r in cells}) > 1 for c in columns if c.startswith("subtask_"))
    csv_header = (sweep / "sweep_report.csv").read_text().splitlines()[0].split(",")
    assert len(csv_header) > 40 and "subtask_1.rougeLsum" in csv_header
    html = (sweep / "sweep_report.html").read_text()
    assert html.count("<tr>") == 3 and "data:image/png;base64," in html
