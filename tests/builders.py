"""Build programs and stages the way `main.py` does: from `conf/` (every default lives there, none in tests)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import instantiate
from omegaconf import DictConfig

from common.config_groups import compose_config
from common.contract import contract_for
from common.program_state import load_module_state
from common.resources import Resources


def config(*overrides: str) -> DictConfig:
    return compose_config(*overrides)


@lru_cache(maxsize=1)
def shared_embedder():
    """One MiniLM for the whole test session (a program shares one between its stages the same way)."""
    return instantiate(config().program.embedder)


def archehr_stage(stage: str, choice: str, *overrides: str, demos: list[dspy.Example] | None = None) -> Any:
    """One ArchEHR stage implementation: `program/archehr/<stage>=<choice>` with its parameters from conf/ (the
    `demos` of the LM question stage replace its configured ones when given)."""
    cfg = config("program=archehr", f"program/archehr/{stage}={choice}", *overrides)
    partial = instantiate(cfg.program[stage], _convert_="all")
    if demos is not None:
        partial.keywords["demos"] = list(demos)
    built = Resources(embedder=shared_embedder()).complete(partial, f"program.{stage}")
    if cfg.program.get("compiled"):  # the learned stages get the compiled program's weights, as in a run
        load_module_state(built, cfg.program.compiled, stage)
    return built


def program(name: str, *overrides: str, role_lms: dict[str, dspy.LM] | None = None, **resources: Any) -> dspy.Module:
    """A whole program as the runner builds it (`contract.build`), with the test session's embedder. Its stages are
    the LM implementations (what the DummyLM tests drive) unless the overrides choose (lm=..., stages=...)."""
    if not any(o.startswith(("lm=", "stages=", "experiment=")) for o in overrides):
        overrides = ("stages=lm", *overrides)
    cfg = config(f"program={name}", *overrides)
    if name == "mediqa_corr":
        resources.setdefault("search", None)
    else:
        resources.setdefault("embedder", shared_embedder())
    return contract_for(cfg).build(cfg, role_lms, **resources)


def grounding_check(choice: str, *overrides: str):
    """The grounding check of a run with an LM, as contract.build makes it (with the compiled state's weights)."""
    cfg = config("program=archehr", "stages=lm", f"program/archehr/grounding={choice}", *overrides)
    built = Resources(embedder=shared_embedder()).complete(instantiate(cfg.program.grounding, _convert_="all"),
                                                           "program.grounding", max_words=75, soft_cut_ratio=0.6)
    if cfg.program.get("compiled"):
        load_module_state(built, cfg.program.compiled, "_grounding")
    return built


def keyed_examples(name: str, limit: int) -> list[dspy.Example]:
    """The first `limit` cases of data/archehr/<name>.xml with their keys, as a compile's examples."""
    from tasks.archehr.data import load_cases, load_key

    data = Path(__file__).resolve().parents[1] / "data" / "archehr"
    cases, key = load_cases(data / f"{name}.xml")[:limit], load_key(data / f"{name}_key.json")
    return [dspy.Example(case=c, key=key[c.case_id]).with_inputs("case") for c in cases]


def qwen_installed() -> bool:
    """Whether the 1.5B Qwen's 22 part packages (the `[qwen]` extra) are all installed."""
    from common.packaged import ModelPackageError, package_folder
    from lms.model_parts import QWEN_CODER_1_5B

    try:
        for n in range(1, QWEN_CODER_1_5B.parts + 1):
            package_folder(QWEN_CODER_1_5B.package(n))
    except ModelPackageError:
        return False
    return True
