"""Compile a program with a DSPy optimizer, evaluate before/after, save DSPy JSON state + metadata, reload safely."""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from pathlib import Path
from typing import Any

import dspy

from common.errors import ClinprogError

METADATA_SUFFIX = ".meta.json"


class CompiledProgramError(ClinprogError, ValueError):
    """A saved program that does not fit the program it is loaded into."""


def program_fingerprint(program: dspy.Module) -> dict[str, list[str]]:
    """Predictor names and their signatures' fields: what a saved state must match to be loadable."""
    return {name: [*pred.signature.input_fields, *pred.signature.output_fields]
            for name, pred in program.named_predictors()}


def data_hash(examples: list[dspy.Example]) -> str:
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(repr(sorted((k, repr(v)) for k, v in ex.items())).encode())
    return digest.hexdigest()[:16]


def evaluate(program: dspy.Module, devset: list[dspy.Example], metric, num_threads: int = 1) -> float:
    if not devset:
        return float("nan")
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
    return optimizer.compile(student, **kwargs)


def save_compiled(program: dspy.Module, path: str | Path, metadata: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))  # DSPy JSON state (demos, instructions), not pickle
    meta = {**metadata, "program": type(program).__name__, "predictors": program_fingerprint(program),
            "dspy_version": dspy.__version__, "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
    Path(str(path) + METADATA_SUFFIX).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def load_compiled(program: dspy.Module, path: str | Path) -> dspy.Module:
    """Load a saved state, refusing one compiled for another program or other signatures."""
    path = Path(path)
    if not path.is_file():
        raise CompiledProgramError(f"program.compiled={path}: no such file")
    meta_path = Path(str(path) + METADATA_SUFFIX)
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        expected = program_fingerprint(program)
        if meta.get("program") != type(program).__name__ or meta.get("predictors") != expected:
            raise CompiledProgramError(
                f"{path} was compiled for {meta.get('program')} with predictors {sorted(meta.get('predictors', {}))}; "
                f"this is {type(program).__name__} with {sorted(expected)}: compile it again for this program")
    try:
        program.load(str(path))
    except Exception as exc:
        raise CompiledProgramError(f"{path}: cannot be loaded into {type(program).__name__}: {exc}") from None
    return program
