"""clinprog entry point: `python main.py program=archehr [lm=...] [task=run|evaluate]`."""

from __future__ import annotations

import importlib
import logging
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map otherwise

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from lms.errors import LMConfigError  # noqa: E402
from optimizers.compile import CompiledProgramError  # noqa: E402
from retrieval.passage import RetrievalError  # noqa: E402
from tasks.archehr.data import ArchEHRDataError  # noqa: E402
from tasks.archehr.metrics import SubmissionError  # noqa: E402
from tasks.mediqa_corr.data import MediqaDataError  # noqa: E402

USER_ERRORS = (LMConfigError, ArchEHRDataError, SubmissionError, RetrievalError, MediqaDataError,
               CompiledProgramError)
log = logging.getLogger("clinprog")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    runner = importlib.import_module(cfg.task_runners.get(cfg.task) or cfg.program.runner)
    task = getattr(runner, cfg.task, None)
    if task is None:
        raise SystemExit(f"error: program={cfg.program.name} has no task={cfg.task}")
    try:
        return task(cfg)
    except USER_ERRORS as exc:
        # One clear line instead of a traceback: a missing key, a dead server, a malformed file.
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
