"""The one predictor factory: the driver's local run (runners/program.py) and every Ray worker
(runners/executors/program_worker.py) build their program here, from the same resolved config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dspy.utils.exceptions import LMError
from omegaconf import DictConfig

from common.contract import ProgramContract
from lms import build_role_lms
from lms.errors import lm_failure
from runners.dspy_setup import configure_dspy


def build_predictor(cfg: DictConfig, contract: ProgramContract, roles: list[str],
                    rate_limiter: Any = None) -> Callable[[Any], dict[str, Any]]:
    """DSPy's settings, the role LMs (a missing key or a dead server fails here) and the program, built once;
    returns `predict(item) -> record`, where an LM failure is one line naming backend and host.
    `rate_limiter`: the callback enforcing `lm.rate_limit` when it is shared across processes (Ray workers)."""
    configure_dspy(cfg, rate_limiter=rate_limiter)
    role_lms = build_role_lms(cfg.lm, roles) if roles else {}
    program = contract.build(cfg, role_lms)

    def predict(item: Any) -> dict[str, Any]:
        try:
            return contract.predict(program, item)
        except LMError as exc:  # unreachable API, timeout, provider error
            raise lm_failure(cfg.lm, exc) from None

    return predict


def built_by_workers(item: Any) -> dict[str, Any]:
    """The driver's `run_one` under an executor whose workers build their own program: never called."""
    raise RuntimeError("this executor's workers run the items; the driver has no program")
