"""clinprog entry point: `python main.py program=archehr [lm=...] [task=run|evaluate|compile]`."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map otherwise

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import common.instantiate  # noqa: E402,F401 - registers the ${shared:...} resolver before configs resolve
from common.errors import ClinprogError  # noqa: E402

log = logging.getLogger("clinprog")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    from common.logs import quiet_third_party

    quiet_third_party(bool(cfg.get("verbose")))
    try:
        runner = importlib.import_module(cfg.task_runners.get(cfg.task) or "runners.program")
        task = getattr(runner, str(cfg.task), None)
        if task is None or cfg.task not in (*cfg.task_runners, *cfg.program_tasks):
            raise ClinprogError(f"unknown task={cfg.task}: choose one of {[*cfg.program_tasks, *cfg.task_runners]}")
        from common.tracking import tracked
        from runners.common import output_dir

        with tracked(cfg, output_dir()):
            return task(cfg)
    except ClinprogError as exc:
        # One clear line instead of a traceback: a missing key, a dead server, a malformed file, a bad config value.
        print(f"error: {exc}", file=sys.stderr)
        record_failure(f"error: {exc}")
        raise SystemExit(2) from None
    except Exception as exc:
        # A bug, not a user error: Hydra prints the traceback (to report); the run folder is still tidied up.
        record_failure(f"error: unexpected {type(exc).__name__}: {exc}")
        raise


def record_failure(line: str) -> None:
    """The error line goes to the run's main.log too; a run folder holding nothing of the run's own is removed (a
    folder another run holds has its run.lock, and one with predictions has them: both are kept)."""
    from runners.common import output_dir

    try:
        out = output_dir()
    except Exception:  # noqa: BLE001 - no run folder to speak of
        return
    # Hydra's files and what a run writes before its first prediction: nothing to resume or look at.
    no_content = {".hydra", "main.log", "fingerprint.json"}
    if out.is_dir() and all(p.name in no_content or (p.name == "predictions.jsonl" and p.stat().st_size == 0)
                            for p in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)  # nothing of the run's own: no clutter of near-empty folders
        for parent in (out.parent, out.parent.parent):  # outputs/<task>/ and outputs/, when this was their only run
            with contextlib.suppress(OSError):
                parent.rmdir()  # only ever removes an empty folder
        return
    with open(out / "main.log", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    main()
