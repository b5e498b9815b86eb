"""`task=compile`: evaluate -> optimize (conf/optimizer) -> evaluate -> save DSPy JSON state + metadata."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lms import build_lm
from optimizers.compile import data_hash, evaluate, run_optimizer, save_compiled
from optimizers.metrics import METRICS, describe_archehr, describe_mediqa, with_feedback
from runners.common import output_dir, write_json


def build_optimizer(cfg: DictConfig, metric) -> Any:
    tp = cfg.optimizer.get("teleprompter")
    if not tp:
        return None
    kwargs: dict[str, Any] = {}
    if cfg.optimizer.get("feedback"):
        describe = describe_mediqa if cfg.program.name == "mediqa_corr" else describe_archehr
        metric = with_feedback(metric, describe)
    if str(tp.get("_target_", "")).endswith("GEPA"):
        roles = cfg.lm.get("roles") or {}
        if roles.get("reflection"):
            kwargs["reflection_lm"] = build_lm(OmegaConf.merge(cfg.lm, {"client": roles.reflection, "roles": {}}))
        else:
            kwargs["reflection_lm"] = dspy.settings.lm
    return instantiate(tp, metric=metric, **kwargs)


def compile_program(cfg: DictConfig, program: dspy.Module, trainset: list[dspy.Example],
                    valset: list[dspy.Example]) -> float:
    if cfg.optimizer.metric not in METRICS:
        raise ValueError(f"optimizer.metric must be one of {sorted(METRICS)}, not {cfg.optimizer.metric!r}")
    metric = METRICS[cfg.optimizer.metric]
    optimizer = build_optimizer(cfg, metric)
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
    write_json(out / "scores.json", {"before": before, "after": after, "objective": after, "demos": demos})
    print(f"saved {save_to} (+{save_to.name}.meta.json); demos per predictor: {demos}")
    return after if not math.isnan(after) else None
