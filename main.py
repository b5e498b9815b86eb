"""clinprog entry point: `python main.py program=archehr [lm=...] [task=run|evaluate|compile]`."""

from __future__ import annotations

import importlib
import logging
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map otherwise

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import common.instantiate  # noqa: E402,F401 - registers the resolvers before configs resolve
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
        from common.outputs import output_dir
        from common.tracking import tracked

        with tracked(cfg, output_dir()):
            return task(cfg)
    except ClinprogError as exc:
        # One clear line instead of a traceback: a missing key, a dead server, a malformed file, a bad config value.
        print(f"error: {exc}", file=sys.stderr)
        from common.outputs import record_failure

        record_failure(f"error: {exc}")
        raise SystemExit(2) from None
    except Exception as exc:
        # A bug, not a user error: Hydra prints the traceback (to report); the run folder is still tidied up.
        from common.outputs import record_failure

        record_failure(f"error: unexpected {type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    from common.overrides import dead_stage_key

    refusal = dead_stage_key(sys.argv[1:])  # a parameter of a stage implementation that is not in use
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    main()
