"""Compile a program with a DSPy optimizer: evaluate, run the teleprompter (saving and loading: common/program_state.py)."""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import dspy

from common.program_state import CompiledProgramError, load_compiled, save_compiled  # noqa: F401 (re-exported)


def data_hash(examples: list[dspy.Example]) -> str:
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(repr(sorted((k, repr(v)) for k, v in ex.items())).encode())
    return digest.hexdigest()[:16]


def evaluate(program: dspy.Module, devset: list[dspy.Example], metric, num_threads: int = 1) -> float:
    if not devset:
        return float("nan")
    program(**devset[0].inputs())  # a stage that cannot run at all (no weights) fails here, once, not per example
    result = dspy.Evaluate(devset=devset, metric=metric, num_threads=num_threads, display_progress=False,
                           provide_traceback=False)(program)
    # the exact mean of the per-example scores (EvaluationResult.score is a percentage rounded to 2 decimals)
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


