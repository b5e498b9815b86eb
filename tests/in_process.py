"""Run `python main.py ...` inside this process as a fresh process would (its argv, environment, working directory
and root logger, restored after): how the tests and the hostile probe run many commands without paying a Python
start each. `main_in_process(argv, cwd, env)` returns what `subprocess.run` would."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shield_absl_stream() -> None:
    """absl (rouge-score's logger) closes its handler's stream on `logging.shutdown` unless that stream is the
    *current* sys.stderr; Hydra's logging setup shuts every handler down while sys.stderr is a run's capture buffer,
    so absl would close whichever stream it holds (pytest's own, or an earlier run's). In a process that shutdown
    happens once, at exit; in here the handler only flushes, and writes to the process's stderr (fd 2)."""
    import absl.logging

    handler = absl.logging.get_absl_handler().python_handler
    handler.stream = sys.__stderr__
    handler.close = handler.flush


def exit_code_of(run: Callable[[], object]) -> int:
    """Run `run` as the interpreter runs a script and return the exit code it would have: a SystemExit's code (a
    string one printed to stderr, then 1), 1 with the traceback for any other exception, else 0."""
    try:
        run()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # noqa: BLE001 - what the interpreter would print before exiting 1
        traceback.print_exc()
        return 1
    return 0


def main_in_process(argv: list[str], cwd: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `main.cli()` with `sys.argv`, the environment (`env`, whole), the working directory and the root logger as
    a fresh process would have them, and restore all four after."""
    from hydra.core.global_hydra import GlobalHydra

    import main as entry

    _shield_absl_stream()
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [str(ROOT / "main.py"), *argv]
    GlobalHydra.instance().clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = exit_code_of(entry.cli)
    finally:
        GlobalHydra.instance().clear()
        for handler in root.handlers[:]:
            if handler not in saved_handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in saved_handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(saved_level)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["main.py", *argv], code, out.getvalue(), err.getvalue())
