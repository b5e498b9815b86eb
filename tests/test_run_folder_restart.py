"""Run folders across processes: one run per folder (the lock another process holds), Ctrl-C and kill -9 of a real
run, then its resume; `run.resume=restart` sets the earlier run's outputs aside together, before the first new
record: killed halfway or stopped by its LM check, it never leaves old scores, submissions or reports beside new
predictions. A real process only where a signal, a second process or Hydra's .hydra files are the point; the reruns
compose and dispatch in this process."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from common.errors import RunFolderError
from common.run_folder import RunFolder, process_identity
from lms.local_server import free_port
from tasks.archehr.data import load_cases
from tests.cli import QUIET, dispatch_run, main_command, run_main
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"
OLD_OUTPUTS = ("predictions.jsonl", "fingerprint.json", "scores.json", "usage.json", "config.json", "report.md",
               "report.html", "submission_subtask_1.json", "submission_subtask_2.json", "submission_subtask_3.json",
               "submission_subtask_4.json")


def earlier_run(out) -> dict[str, bytes]:
    """A finished no-LM run of two bundled cases in `out` (a process: Hydra writes its .hydra files too): every output
    file and its bytes."""
    first = run_main("data.limit=2", f"hydra.run.dir={out}", quiet=True)
    assert first.returncode == 0, first.stderr[-1500:]
    return {name: (out / name).read_bytes() for name in OLD_OUTPUTS}


def new_record_in(predictions, old: bytes) -> bool:
    """Whether `predictions` holds a whole record and is not the earlier run's file (absent: not yet)."""
    try:
        data = predictions.read_bytes()
    except FileNotFoundError:
        return False
    return data.count(b"\n") >= 1 and data != old


def assert_set_aside_together(out, old: dict[str, bytes]) -> None:
    for name in old:
        if name not in ("predictions.jsonl", "fingerprint.json"):
            assert not (out / name).exists(), f"{name} of the earlier run is still beside the new predictions"
    [previous] = list((out / "previous").iterdir())
    assert {name: (previous / name).read_bytes() for name in old} == old
    assert (previous / ".hydra" / "overrides.yaml").read_text().count("data.limit=2") == 1  # its own config too


def test_restart_moves_every_output_of_the_earlier_run_together(tmp_path):
    old = {name: f"{name} of the earlier run\n".encode() for name in OLD_OUTPUTS}
    old["fingerprint.json"] = json.dumps({"program": {"threshold": 1}}).encode()
    for name, data in old.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "notes.txt").write_text("the user's own file")
    with RunFolder(tmp_path, {"program": {"threshold": 2}}, resume="restart") as folder:
        assert not folder.predictions.exists()
    [previous] = list((tmp_path / "previous").iterdir())
    assert {p.name: p.read_bytes() for p in previous.iterdir()} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fingerprint.json", "notes.txt", "previous"]
    assert json.loads((tmp_path / "fingerprint.json").read_text()) == {"program": {"threshold": 2}}


def test_a_restart_killed_after_its_first_records_leaves_no_old_outputs(tmp_path):
    out = tmp_path / "run"
    old = earlier_run(out)
    proc = subprocess.Popen(main_command(f"data.cases={DEV_CASES}", "run.resume=restart", f"hydra.run.dir={out}", *QUIET),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    predictions = out / "predictions.jsonl"
    deadline = time.monotonic() + 300
    # the restart moves the earlier predictions aside while this loop reads them: a read can find no file
    while time.monotonic() < deadline and not new_record_in(predictions, old["predictions.jsonl"]):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL  # 34 cases: killed long before the end
    assert_set_aside_together(out, old)
    new_ids = {json.loads(line)["case_id"] for line in predictions.read_text().splitlines()}
    assert new_ids and new_ids <= {case.case_id for case in load_cases(DEV_CASES)}


def test_a_restart_stopped_by_its_lm_check_leaves_no_old_outputs(tmp_path):
    out = tmp_path / "run"
    old = earlier_run(out)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    # a process: Hydra's callback keeps the earlier run's .hydra files, which the restart sets aside with the rest
    proc = run_main("lm=openai_compatible", f"lm.client.api_base={dead}", "lm.client.num_retries=0", "run.resume=restart",
                    f"cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={out}", quiet=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert_set_aside_together(out, old)
    assert not (out / "predictions.jsonl").exists()


HOLD = """
import sys
from common.run_folder import RunFolder
with RunFolder(sys.argv[1], {"a": 1}):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_one_run_per_folder_and_the_error_says_how_to_clear_the_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunFolderError) as refused, RunFolder(tmp_path, {"a": 1}):
            pass
        assert str(refused.value).startswith(f"{tmp_path} is in use by another run (PID {holder.pid}: ")
        assert str(refused.value).endswith(f"if no run uses this folder, delete {tmp_path / 'run.lock'}")
    finally:
        holder.communicate("\n", timeout=60)
    assert not (tmp_path / "run.lock").exists()


@pytest.mark.parametrize("lock", [
    "1\n",                                    # echo 1 > run.lock: a live process, not a clinprog run
    "{pid}\n",                                # the PID of a live process that is not a clinprog run
    '{{"pid": {pid}, "start": "1", "command": "python main.py"}}\n',  # a reused PID: another start time
    "{dead}\n",                               # a process that is gone
    "99999999999999999999\n",                 # no process can have it
    "not a lock\n",
])
def test_a_lock_no_run_of_this_folder_holds_is_taken_over(tmp_path, caplog, lock):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "run.lock").write_text(lock.format(pid=os.getppid(), dead=dead.pid))
    with RunFolder(tmp_path, {"a": 1}):
        held = json.loads((tmp_path / "run.lock").read_text())
        assert held == {"pid": os.getpid(), **process_identity(os.getpid()), "folder": str(tmp_path)}
        assert held["start"] and held["command"]
    assert "taking over a stale lock" in caplog.text
    assert not (tmp_path / "run.lock").exists()


@pytest.fixture
def gated_lm():
    """An LM server for the question stage only that answers the first 2 calls and holds every later one until
    `release()` (or 300 s): a run is then always mid-run with exactly 2 cases saved when the test acts on it, on any
    machine (no timing to race on)."""
    import threading

    from tests.cli import fake_openai_server

    gate, calls = threading.Event(), []

    def reply(_: str) -> str:
        calls.append(1)
        if len(calls) > 2:
            gate.wait(timeout=300)
        return json.dumps({"clinician_question": "Why was the patient admitted?"})

    with fake_openai_server(reply) as server:
        try:
            yield (*server["overrides"], "stages=no_lm", "program/archehr/question=lm"), gate.set
        finally:
            gate.set()


RUN_CASES = 12


def test_a_second_run_refuses_a_busy_folder_then_ctrl_c_saves_finished_cases_and_the_rerun_resumes(tmp_path, gated_lm,
                                                                                                    caplog):
    """Two concurrent runs into one folder (the second refuses in one line and writes nothing), then Ctrl-C of the
    first (its finished cases saved, one line), then the rerun resumes: nothing lost, nothing run twice."""
    lm_overrides, release = gated_lm
    out = tmp_path / "run"
    args = (f"data.cases={DEV_CASES}", f"data.limit={RUN_CASES}", "metrics.bertscore=null", "progress=false",
            f"hydra.run.dir={out}", *lm_overrides)
    # SIGINT as a terminal delivers it, even when pytest itself runs as a background job (which ignores SIGINT)
    first = subprocess.Popen(main_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    predictions = out / "predictions.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (predictions.exists() and predictions.read_text().count("\n") >= 2):
        time.sleep(0.05)
    assert first.poll() is None, first.communicate()[1][-1500:]   # held at its third case's LM call

    second = dispatch_run(*args)
    assert second.returncode == 2, second.stderr[-1500:]
    assert second.stderr.strip().startswith(f"error: {out} is in use by another run (PID {first.pid}: ")
    assert second.stderr.strip().count("\n") == 0 and "delete" in second.stderr
    assert predictions.read_text().count("\n") == 2   # the second run wrote nothing

    first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=120)
    release()
    saved = predictions.read_text().count("\n")
    assert first.returncode == 130, stderr[-1500:]
    assert saved == 2
    assert stderr.strip().splitlines()[-1] == (f"interrupted: {saved} cases saved in {out}; to resume, rerun the same "
                                               f"command with hydra.run.dir={out}")
    assert "Traceback" not in stderr
    assert (out / "main.log").read_text(encoding="utf-8").splitlines()[-1] == stderr.strip().splitlines()[-1]

    resumed = dispatch_run(*args)
    assert resumed.returncode == 0, resumed.stderr[-1500:]
    ids = [json.loads(line)["case_id"] for line in predictions.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == RUN_CASES  # nothing lost, nothing run twice
    caplog.set_level(logging.INFO)
    smaller = dispatch_run(*args, f"data.limit={RUN_CASES - 4}")
    assert smaller.returncode == 0, smaller.stderr[-1500:]
    said = smaller.stdout + smaller.stderr + caplog.text  # what it printed and logged
    assert "4 cases in" in said and "are not among this run's inputs" in said
    assert len(json.loads((out / "submission_subtask_1.json").read_text())) == RUN_CASES - 4
