"""Run the task a composed config names: the whole body of `python main.py ...` once Hydra has composed `cfg`.

`main.py` only wraps this in `@hydra.main`; tests call it in process through the same `@hydra.main` entry
(`tests/cli.py`), so a test of an error line asserts what a user sees without paying a Python start per run.
"""

from __future__ import annotations

import sys

from hydra.utils import get_method
from omegaconf import DictConfig

from common.errors import ClinprogError


def dispatch(cfg: DictConfig) -> float | None:
    """Run `cfg.task`; a `ClinprogError` becomes one `error:` line on stderr (and in the run folder), exit code 2."""
    from common.logs import quiet_third_party

    quiet_third_party(bool(cfg.get("verbose")))
    try:
        from common.settings import validate

        validate(cfg)  # every schema'd section (serve.*, run.ray.*), before any task runs
        path = (cfg.get("tasks") or {}).get(str(cfg.task))
        if not path:
            raise ClinprogError(f"unknown task={cfg.task}: choose one of {list(cfg.get('tasks') or {})}")
        try:
            task = get_method(str(path))
        except Exception as exc:  # noqa: BLE001 - a task path edited to something that is not a function
            raise ClinprogError(f"tasks.{cfg.task}={path}: not a function clinprog can import ({exc})") from None
        from common.outputs import output_dir
        from common.tracking import tracked

        with tracked(cfg, output_dir()):
            return task(cfg)
    except ClinprogError as exc:
        from common.logs import error_text
        from common.multirun import job_failed

        line = error_text(exc)  # user input in the message (a case id) cannot add lines of its own
        if job_failed(line):  # a multirun job: the next job runs; the sweep's end lists it and exits 2
            return None
        # One clear line instead of a traceback: a missing key, a dead server, a malformed file, a bad config value.
        print(line, file=sys.stderr)
        from common.outputs import record_failure

        record_failure(line)
        raise SystemExit(2) from None
    except Exception as exc:
        from common.multirun import job_failed
        from common.outputs import in_multirun

        if in_multirun():  # a bug in one multirun job: its traceback now, the other jobs still run (exit 1 at the end)
            import traceback

            from common.logs import error_text

            traceback.print_exc()
            job_failed(error_text(f"unexpected {type(exc).__name__}: {exc}"), unexpected=True)
            return None
        # A bug, not a user error: Hydra prints the traceback (to report); the run folder is still tidied up.
        from common.logs import error_text
        from common.outputs import record_failure

        record_failure(error_text(f"unexpected {type(exc).__name__}: {exc}"))
        raise
