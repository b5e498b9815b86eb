"""One Ray worker (an actor): it builds the run's program once from the driver's resolved config
(runners/dspy_setup.py), then predicts one item per call and returns the record; the driver writes them."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from dspy.utils.callback import BaseCallback

from lms.rate_limit import request_tokens


class RemoteRateLimiter(BaseCallback):
    """`lm.rate_limit` for a whole Ray run: every LM request of every worker first books its place with the run's one
    `RateLimiter` actor, which answers how long to wait (0: go). One clock decides, so workers on different machines
    agree."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        import ray

        tokens = request_tokens(inputs)
        while wait := ray.get(self.actor.reserve.remote(tokens)):
            time.sleep(wait)


class ProgramWorker:
    def __init__(self, config: dict[str, Any], cwd: str, limiter: Any = None) -> None:
        # built on the first call (ready() or run()), so creating the actor returns at once
        self._config, self._cwd, self._limiter = config, cwd, limiter
        self._predict = None
        self._building = threading.Lock()  # lm.num_threads > 1: the first calls arrive together

    def _build(self) -> None:
        with self._building:
            if self._predict is not None:
                return
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            if os.path.isdir(self._cwd):  # relative data paths resolve as on the driver (a local Ray, a shared disk)
                os.chdir(self._cwd)
            from omegaconf import OmegaConf

            from common.contract import contract_for
            from common.logs import quiet_third_party
            from runners.dspy_setup import build_predictor

            cfg = OmegaConf.create(self._config)
            quiet_third_party(bool(cfg.get("verbose")))
            contract = contract_for(cfg)
            roles = contract.lm_roles(cfg)  # the driver already chose the stages (an LM or the no-LM ones)
            limiter = RemoteRateLimiter(self._limiter) if self._limiter is not None else None
            self._predict = build_predictor(cfg, contract, roles, rate_limiter=limiter)

    def ready(self) -> dict[str, Any]:
        """Build now (a bad config or a missing model fails before any item) and say where this worker runs."""
        import ray

        self._build()
        return {"pid": os.getpid(), "host": socket.gethostname(), "node": ray.util.get_node_ip_address()}

    def run(self, item: Any) -> dict[str, Any]:
        self._build()
        return self._predict(item)
