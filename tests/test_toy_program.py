"""A fourth program defined only inside tests/ (tests/toy_program) runs, evaluates, compiles, serves and reports
through main.py: the program contract is the only seam (no change outside tests/ was needed to add it)."""

from __future__ import annotations

import json

import pytest

from tests.cli import ROOT, dispatch_run, fake_openai_server

pytestmark = pytest.mark.integration
TOY = ("program=fever", f"hydra.searchpath=[file://{ROOT / 'tests' / 'toy_program' / 'conf'}]", "progress=false")


def fever_reply(message: str) -> str:
    """A 'model' that tags a fever when the note says 39 or febrile (the other notes say afebrile/no fever)."""
    note = message.lower()
    return json.dumps({"fever": "yes" if ("39." in note or "febrile to" in note) else "no"})


@pytest.fixture
def lm():
    with fake_openai_server(fever_reply) as server:
        yield ("lm=openai_compatible", "lm.client.model=m", f"lm.client.api_base={server['api_base']}",
               "lm.client.cache=false")


def test_run_evaluate_and_report(tmp_path, lm):
    run = dispatch_run(*TOY, *lm, f"hydra.run.dir={tmp_path / 'run'}")
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [(r["id"], r["fever"]) for r in records] == [("f1", "yes"), ("f2", "no"), ("f3", "yes"), ("f4", "no")]
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["accuracy"] == 1.0
    assert (tmp_path / "run" / "submission.tsv").read_text().splitlines()[0] == "f1\tyes"
    assert (tmp_path / "run" / "report.html").is_file() and "program=fever" in (tmp_path / "run" / "report.md").read_text()

    evaluate = dispatch_run(*TOY, "task=evaluate", f"data.submissions={tmp_path / 'run' / 'submission.tsv'}",
                            f"hydra.run.dir={tmp_path / 'eval'}")
    assert evaluate.returncode == 0, evaluate.stderr[-2000:]
    assert json.loads((tmp_path / "eval" / "scores.json").read_text())["accuracy"] == 1.0

    (tmp_path / "run" / "report.html").unlink()
    report = dispatch_run("task=report", f"dir={tmp_path / 'run'}", f"hydra.run.dir={tmp_path / 'rep'}",
                          *TOY[1:2])
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "run" / "report.html").is_file()


def test_compile(tmp_path, lm):
    saved = tmp_path / "fever_bootstrap.json"
    proc = dispatch_run(*TOY, *lm, "task=compile", "optimizer=bootstrap", f"program.optimize.save_to={saved}",
                        f"hydra.run.dir={tmp_path / 'compile'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    state = json.loads(saved.read_text())
    assert "tag" in json.dumps(state)  # the toy's predictor, saved like any DSPy state
    rerun = dispatch_run(*TOY, *lm, f"program.compiled={saved}", f"hydra.run.dir={tmp_path / 'run'}")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    # the toy scores 1.0 before and after: a compile that must improve is not adopted, one line, the state kept
    strict = dispatch_run(*TOY, *lm, "task=compile", "optimizer=bootstrap", "optimizer.guard.adopt_if=improves",
                          f"program.optimize.save_to={saved}", f"hydra.run.dir={tmp_path / 'strict'}")
    assert strict.returncode == 2 and json.loads(saved.read_text()) == state
    errors = [line for line in strict.stderr.splitlines() if line.startswith("error:")]
    assert errors == strict.stderr.strip().splitlines()[-1:] == [
        "error: the compiled program was not adopted (the validation score did not improve (1.0000 before, 1.0000 "
        f"after; optimizer.guard.adopt_if=improves)); {saved} is unchanged (what was fitted: "
        f"{tmp_path / 'strict' / 'compiled_program.json'})"]
    assert "**Not adopted**: the validation score did not improve" in (tmp_path / "strict" / "compile_report.md").read_text()


def test_its_learned_stage_is_fitted_by_task_compile_optimizer_fit(tmp_path, lm):
    """The toy's learned stage (tests/toy_program/learned.py) says how it is fitted; optimizer=fit (which names no
    stage) fits it, program.save() holds it and a run loads it: a new learned stage is new files only."""
    saved = tmp_path / "fever_fit.json"
    proc = dispatch_run(*TOY, *lm, "task=compile", "optimizer=fit", f"program.optimize.save_to={saved}",
                        f"hydra.run.dir={tmp_path / 'compile'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(saved.read_text())["cutoff.cutoff"] == {"format": "toy-cutoff/1", "cutoff": 38.6}
    assert "cutoff: cutoff=38.6, notes_with_a_temperature=2, right=2" in proc.stdout
    rerun = dispatch_run(*TOY, *lm, f"program.compiled={saved}", f"hydra.run.dir={tmp_path / 'run'}")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["accuracy"] == 1.0


def test_serve(tmp_path, lm):
    import httpx

    from tests.serve_helpers import Server

    server = Server(*TOY, *lm, f"hydra.run.dir={tmp_path / 'serve'}")
    url = server.url
    try:
        answer = httpx.post(f"{url}/v1/fever/tag", json={"note_id": "n9", "text": "Febrile to 39.1 on admission."},
                            timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["note_id"] == "n9" and answer.json()["fever"] == "yes"
        assert "/v1/fever/tag" in httpx.get(f"{url}/openapi.json").json()["paths"]
        bad = httpx.post(f"{url}/v1/fever/tag", json={"note_id": "n9"}, timeout=30)
        assert bad.status_code == 422 and "text" in bad.text
    finally:
        server.stop()
