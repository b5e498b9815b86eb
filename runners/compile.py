"""`task=compile`: evaluate -> optimize (conf/optimizer) -> evaluate -> save DSPy JSON state + metadata."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from common.contract import ProgramContract
from common.errors import ConfigError
from lms import build_lm
from optimizers.compile import data_hash, evaluate, run_optimizer, save_compiled
from optimizers.metrics import with_feedback
from runners.common import output_dir, write_json, write_text


def program_metric(cfg: DictConfig, contract: ProgramContract):
    name = cfg.optimizer.metric
    if name not in contract.metrics:
        raise ConfigError(f"optimizer.metric must be one of {sorted(contract.metrics)} for program={contract.name}, "
                          f"not {name!r}")
    return contract.metrics[name]


def build_optimizer(cfg: DictConfig, contract: ProgramContract, metric) -> Any:
    """The teleprompter of `conf/optimizer`; reflective ones (a `reflection_lm` parameter, e.g. GEPA) get textual
    feedback from the program's `describe` and a reflection LM (`lm.roles.reflection`, else the task LM)."""
    tp = cfg.optimizer.get("teleprompter")
    if not tp:
        return None
    kwargs: dict[str, Any] = {}
    if cfg.optimizer.get("feedback"):
        metric = with_feedback(metric, contract.describe)
    if "reflection_lm" in inspect.signature(get_class(tp._target_).__init__).parameters:
        roles = cfg.lm.get("roles") or {}
        if roles.get("reflection"):
            kwargs["reflection_lm"] = build_lm(OmegaConf.merge(cfg.lm, {"client": roles.reflection, "roles": {}}))
        else:
            kwargs["reflection_lm"] = dspy.settings.lm
    return instantiate(tp, metric=metric, **kwargs)


def compile_program(cfg: DictConfig, contract: ProgramContract, program: dspy.Module, trainset: list[dspy.Example],
                    valset: list[dspy.Example]) -> float | None:
    metric = program_metric(cfg, contract)
    optimizer = build_optimizer(cfg, contract, metric)
    before = evaluate(program, valset, metric)
    print(f"{cfg.optimizer.metric} on {len(valset)} validation examples before: {before:.4f}")
    compiled = run_optimizer(optimizer, program, trainset, valset)
    after = evaluate(compiled, valset, metric)
    print(f"after {cfg.optimizer.name}: {after:.4f}")
    out = output_dir()
    save_to = Path(cfg.program.optimize.save_to)
    metadata = {
        "optimizer": OmegaConf.to_container(cfg.optimizer, resolve=True),
        "metric": cfg.optimizer.metric,
        "scores": {"before": before, "after": after},
        "train": {"size": len(trainset), "hash": data_hash(trainset)},
        "val": {"size": len(valset), "hash": data_hash(valset)},
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    for path in {save_to, out / "compiled_program.json"}:
        save_compiled(compiled, path, metadata)
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    curated = {name: len(m.curated_demos) for name, m in compiled.named_sub_modules() if hasattr(m, "curated_demos")}
    write_json(out / "scores.json", {"before": before, "after": after, "objective": after, "demos": demos,
                                     "curated_demos": curated})
    from reports.html import esc, json_block, page, table

    write_text(out / "compile_report.html", page(f"clinprog compile {contract.name}", (
        f"<h1>Compile: program={esc(contract.name)}, optimizer={esc(cfg.optimizer.name)}</h1>"
        + table(["", cfg.optimizer.metric], [("before", before), ("after", after)],
                caption=f"{len(valset)} validation examples, {len(trainset)} training examples")
        + table(["predictor", "learned demos", "instructions"],
                [(name, len(p.demos), p.signature.instructions) for name, p in compiled.named_predictors()])
        + f"<h2>Saved</h2><p>{esc(save_to)}</p>{json_block(metadata['optimizer'])}"), script=""))
    print(f"saved {save_to} (+{save_to.name}.meta.json); learned demos per predictor: {demos}"
          + (f"; curated demos kept from config: {curated}" if any(curated.values()) else ""))
    return after if not math.isnan(after) else None
