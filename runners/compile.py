"""`task=compile`: evaluate -> optimize (conf/optimizer) -> evaluate -> save DSPy JSON state + metadata."""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from common.contract import ProgramContract
from common.errors import ClinprogError, ConfigError
from common.outputs import output_dir, write_json, write_text
from common.parameters import LearnedStateError
from common.program_state import save_compiled
from lms import build_lm
from optimizers.instruction_guard import GuardLimits, adoption_refusal, example_inputs, guard_instructions, snapshot
from optimizers.split_overlap import split_overlap
from reports import compile_report
from reports.compile_report import guard_lines


def data_hash(examples: list[dspy.Example]) -> str:
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(repr(sorted((k, repr(v)) for k, v in ex.items())).encode())
    return digest.hexdigest()[:16]


def evaluate(program: dspy.Module, devset: list[dspy.Example], metric) -> float:
    if not devset:
        return float("nan")
    program(**devset[0].inputs())  # a stage that cannot run at all (no weights) fails here, once, not per example
    result = dspy.Evaluate(devset=devset, metric=metric, num_threads=1, display_progress=False,
                           provide_traceback=False)(program)
    # the exact mean (EvaluationResult.score is a percentage rounded to 2 decimals)
    scores = [float(getattr(s, "score", s) or 0.0) for _, _, s in result.results]
    return sum(scores) / len(scores)


def run_optimizer(optimizer: Any, student: dspy.Module, trainset: list[dspy.Example],
                  valset: list[dspy.Example]) -> dspy.Module:
    """Call `optimizer.compile` with what its signature accepts (BootstrapFewShot takes no valset)."""
    if optimizer is None:
        return student
    params = inspect.signature(optimizer.compile).parameters
    kwargs: dict[str, Any] = {"trainset": trainset}
    if "valset" in params and valset:
        kwargs["valset"] = valset
    if "requires_permission_to_run" in params:
        kwargs["requires_permission_to_run"] = False
    compiled = optimizer.compile(student, **kwargs)
    compiled._compiled = True  # DSPy's teleprompters set it; ours (logistic, finetune) return the student fitted
    return compiled


def with_feedback(metric: Callable[..., float], describe: Callable[[Any, Any, float], str]):
    """GEPA's metric form: a score plus textual feedback the reflection LM can act on."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        value = float(metric(gold, pred, trace))
        return dspy.Prediction(score=value, feedback=describe(gold, pred, value))

    return gepa_metric


def program_metric(cfg: DictConfig, contract: ProgramContract):
    name = cfg.optimizer.metric
    if name not in contract.objectives:
        raise ConfigError(f"optimizer.metric must be one of {sorted(contract.objectives)} for program={contract.name}, "
                          f"not {name!r}")
    return contract.objectives[name]


def build_optimizer(cfg: DictConfig, contract: ProgramContract, metric) -> Any:
    """The teleprompter of `conf/optimizer`; a reflective one (GEPA) gets a reflection LM (`lm.roles.reflection`,
    else the task LM)."""
    tp = cfg.optimizer.get("teleprompter")
    if not tp:
        return None
    kwargs: dict[str, Any] = {}
    if cfg.optimizer.get("feedback"):
        metric = with_feedback(metric, contract.feedback)
    if "reflection_lm" in inspect.signature(get_class(tp._target_).__init__).parameters:
        roles = cfg.lm.get("roles") or {}
        kwargs["reflection_lm"] = (build_lm(OmegaConf.merge(cfg.lm, {"client": roles.reflection, "roles": {}}))
                                   if roles.get("reflection") else dspy.settings.lm)
    return instantiate(tp, metric=metric, **kwargs)


def compile_program(cfg: DictConfig, contract: ProgramContract, program: dspy.Module, trainset: list[dspy.Example],
                    valset: list[dspy.Example]) -> float | None:
    metric = program_metric(cfg, contract)
    save_to = Path(cfg.program.optimize.save_to)
    if save_to.is_dir() or save_to.suffix != ".json":  # refused before any optimizing, not after it
        raise ConfigError(f"program.optimize.save_to={save_to}: must name a .json file (DSPy's JSON state)")
    limits = GuardLimits.from_config(cfg.optimizer.get("guard"))
    optimizer = build_optimizer(cfg, contract, metric)
    overlap = split_overlap(trainset, valset, contract.item_id, cfg.data.get("train"), cfg.data.get("val"))
    if overlap:
        print(overlap.message)
    preflight = getattr(optimizer, "preflight", None)
    if callable(preflight):  # checked before minutes of scoring
        preflight(program, **({"trainset": trainset} if "trainset" in inspect.signature(preflight).parameters else {}))
    before_state = snapshot(program, contract.item_id)
    try:
        before = evaluate(program, valset, metric)
        print(f"{cfg.optimizer.metric} on {len(valset)} validation examples before: {before:.4f}")
    except LearnedStateError as exc:  # a learned stage with no weights yet (compiling it from scratch)
        before = float("nan")
        print(f"{cfg.optimizer.metric} before: not scored ({exc})")
    compiled = run_optimizer(optimizer, program, trainset, valset)
    proposed = None
    if any(p.signature.instructions != before_state[n].instruction for n, p in compiled.named_predictors()
           if n in before_state):
        proposed = evaluate(compiled, valset, metric)  # scored as the optimizer left it, before the guard
    # a teleprompter that learns weights (optimizer=finetune|logistic|fit) reviews them and may refuse them
    learned_review = optimizer.review(compiled, valset, metric) if hasattr(optimizer, "review") else None
    if learned_review is not None:
        for line in learned_review["lines"]:
            print(f"learned-weights guard: {line}")
    reviews = guard_instructions(compiled, before_state, example_inputs(trainset + valset, contract.item_id), limits,
                                 contract.item_id)
    for line in guard_lines({"predictors": [r.to_json() for r in reviews]}):
        print(f"instruction guard: {line}")
    rejected = any(not r.verdict.adopted for r in reviews)
    after = evaluate(compiled, valset, metric) if rejected or proposed is None else proposed
    print(f"after {cfg.optimizer.name}: {after:.4f}"
          + (f" (as the optimizer proposed it: {proposed:.4f}; rejected instructions put back)" if rejected else ""))
    # adopted only when data.val says so (optimizer.guard.adopt_if)
    not_adopted = adoption_refusal(limits.adopt_if, before, after)
    if not_adopted:
        print(f"adoption guard: not adopted: {not_adopted}")
    out = output_dir()
    guard = [r.to_json() for r in reviews]
    metadata = {
        "optimizer": OmegaConf.to_container(cfg.optimizer, resolve=True),
        "metric": cfg.optimizer.metric,
        "scores": {"before": before, "after": after, "proposed": proposed if rejected else None},
        "train": {"size": len(trainset), "hash": data_hash(trainset)},
        "val": {"size": len(valset), "hash": data_hash(valset)},
        "train_val_overlap": overlap.message if overlap else None,
        "instruction_guard": [{k: g[k] for k in ("predictor", "verdict", "adopted", "reasons")} for g in guard],
        "learned_review": learned_review,
        "adoption": {"rule": limits.adopt_if, "refused": not_adopted},
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
    why_refused = ([not_adopted] if not_adopted else []) + list((learned_review or {}).get("refused") or [])
    refused = bool(why_refused)
    for path in ({out / "compiled_program.json"} if refused else {save_to, out / "compiled_program.json"}):
        save_compiled(compiled, path, metadata)
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    curated = {name: len(m.curated_demos) for name, m in compiled.named_sub_modules() if hasattr(m, "curated_demos")}
    write_json(out / "scores.json", {"before": before, "after": after, "objective": after, "demos": demos,
                                     "curated_demos": curated, "proposed": metadata["scores"]["proposed"],
                                     "rejected_instructions": [g["predictor"] for g in guard if not g["adopted"]]})
    report = {"program": contract.name, "optimizer": cfg.optimizer.name, "metric": cfg.optimizer.metric,
              "train_size": len(trainset), "val_size": len(valset), "scores": metadata["scores"],
              "overlap_warning": metadata["train_val_overlap"], "predictors": guard, "curated_demos": curated,
              "saved": None if refused else str(save_to), "optimizer_config": metadata["optimizer"],
              "learned_review": learned_review, "adoption": metadata["adoption"]}
    write_json(out / "compile_report.json", report)
    write_text(out / "compile_report.md", compile_report.markdown(report))
    write_text(out / "compile_report.html", compile_report.html(report))
    if refused:
        what = "compiled program was" if not_adopted else "learned weights were"
        raise ClinprogError(f"the {what} not adopted ({'; '.join(why_refused)}); "
                            f"{save_to} is unchanged (what was fitted: {out / 'compiled_program.json'})")
    print(f"saved {save_to} (+{save_to.name}.meta.json); learned demos per predictor: {demos}"
          + (f"; curated demos kept from config: {curated}" if any(curated.values()) else ""))
    print(f"compile report: {out / 'compile_report.md'} (+ .html)")
    return after if not math.isnan(after) else None
