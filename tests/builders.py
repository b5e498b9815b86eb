"""Build programs and stages the way `main.py` does: from `conf/` (every default lives there, none in tests)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import dspy
from omegaconf import DictConfig

import common.instantiate  # noqa: F401 - the ${shared:...} resolver
from common.instantiate import build
from runners.program import compose_config, contract_for


def config(*overrides: str) -> DictConfig:
    return compose_config(*overrides)


@lru_cache(maxsize=1)
def shared_embedder():
    """One MiniLM for the whole test session (a program shares one between its stages the same way)."""
    return build(config().program.offline.embedder)


def archehr_stage(stage: str, choice: str, *overrides: str, demos: list[dspy.Example] | None = None) -> Any:
    """One ArchEHR stage implementation from `program.implementations.<stage>.<choice>`."""
    cfg = config("program=archehr", *overrides)
    return build(cfg.program.implementations[stage][choice], embedder=shared_embedder(),
                 question_demos=list(demos or []), role_lms={})


def program(name: str, *overrides: str, role_lms: dict[str, dspy.LM] | None = None, **resources: Any) -> dspy.Module:
    """A whole program as the runner builds it (`contract.build`), with the test session's embedder."""
    cfg = config(f"program={name}", *overrides)
    if name == "mediqa_corr":
        resources.setdefault("search", None)
    else:
        resources.setdefault("embedder", shared_embedder())
    return contract_for(cfg).build(cfg, role_lms, **resources)
