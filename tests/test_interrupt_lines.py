"""Ctrl-C outside a run's case loop (loading, compiling, writing outputs) is one `interrupted:` line and exit 130,
as inside the loop (tests/test_run_folder_restart.py), never a traceback; a run folder holding nothing of its own is
removed (issue 69: ~50 lines of traceback during `task=compile`, a chained one in the first second of a run)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import dispatch_run, main_command
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

LINE = "interrupted: task={task} stopped before it finished; what earlier commands saved is unchanged; rerun the same command"


def interrupted_task(cfg) -> None:
    """A task Ctrl-C stops (what KeyboardInterrupt does to any task outside the case loop)."""
    raise KeyboardInterrupt


def waiting_task(cfg) -> None:
    """A task that says it started, then works until a signal stops it."""
    Path(cfg.marker).write_text("started")
    time.sleep(120)


def test_ctrl_c_in_a_task_is_one_line_and_no_empty_run_folder(tmp_path):
    run = dispatch_run("task._target_=tests.test_interrupt_lines.interrupted_task", f"hydra.run.dir={tmp_path / 'run'}")
    assert run.returncode == 130 and run.stderr.strip() == LINE.format(task="interrupted"), run.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_a_real_sigint_outside_the_case_loop_is_one_line(tmp_path):
    marker = tmp_path / "started"
    process = subprocess.Popen(
        main_command("task._target_=tests.test_interrupt_lines.waiting_task", f"+marker={marker}",
                     f"hydra.run.dir={tmp_path / 'run'}"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1][-2000:]
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and stderr.strip() == LINE.format(task="waiting"), stderr[-2000:]


def test_the_line_says_what_each_task_keeps_and_how_to_go_on(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from runners import dispatch

    def line(target: str) -> str:
        return dispatch.interrupted_line(OmegaConf.create({"task": {"_target_": target}}))

    assert line("runners.retrieval.index").endswith("the chunks it stored are kept; rerun the same command to go on")
    assert "a compile's state file is written only at its end" in line("runners.program.compile_task")
    folder = tmp_path / "run dir"
    folder.mkdir()
    (folder / "predictions.jsonl").write_text("{}\n")
    monkeypatch.setattr(dispatch.HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(dispatch, "output_dir", lambda: folder)
    # stopped while scoring, after every case: the same folder resumes; a plain rerun would start a new one
    assert line("runners.program.run").endswith(f"to resume, rerun the same command with 'hydra.run.dir={folder}'")
