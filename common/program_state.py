"""A program's saved state: DSPy JSON (`program.save()`) beside a `.meta.json` (what it was compiled for and on),
loaded by parameter name once it is known to fit. A Predict the file does not name keeps its configured state, so one
shipped state serves the learned stages whichever LM the other stages use."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy
import orjson

from common import json_input
from common.errors import ClinprogError
from common.parameters import LogisticHead, LoraAdapter

METADATA_SUFFIX = ".meta.json"
LEARNED = (LogisticHead, LoraAdapter)


class CompiledProgramError(ClinprogError, ValueError):
    """A saved program that does not fit the program it is loaded into."""


def program_fingerprint(program: dspy.Module) -> dict[str, list[str]]:
    """Predictor names and their signatures' fields: what a saved state must match to be loadable."""
    return {name: [*pred.signature.input_fields, *pred.signature.output_fields]
            for name, pred in program.named_predictors()}


def learned_parameters(program: dspy.Module) -> dict[str, Any]:
    return {name: p for name, p in program.named_parameters() if isinstance(p, LEARNED)}


def save_compiled(program: dspy.Module, path: str | Path, metadata: dict[str, Any]) -> Path:
    """program.save() (JSON, never pickle) and its meta, each written whole (a temporary file, then a rename)."""
    path = Path(path)
    if path.is_dir():
        raise CompiledProgramError(f"{path}: is a folder; program.optimize.save_to must name a .json file")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.json")
    meta_tmp = Path(str(tmp) + METADATA_SUFFIX)
    for stale in (tmp, meta_tmp):  # a save killed (kill -9) before its renames: never left beside save_to
        stale.unlink(missing_ok=True)
    try:
        program.save(str(tmp))
        meta = {**metadata, "program": type(program).__name__, "predictors": program_fingerprint(program),
                "learned": sorted(learned_parameters(program)), "dspy_version": dspy.__version__,
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
        meta_tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        tmp.replace(path)
        meta_tmp.replace(Path(str(path) + METADATA_SUFFIX))
    finally:  # Ctrl-C or an error mid-save: the saved state stays as it was, without the half-written copy
        for left in (tmp, meta_tmp):
            left.unlink(missing_ok=True)
    return path


def read_meta(path: str | Path) -> dict[str, Any] | None:
    meta_path = Path(str(path) + METADATA_SUFFIX)
    if not meta_path.is_file():
        return None
    try:
        meta = json_input.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CompiledProgramError(f"{meta_path}: not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise CompiledProgramError(f"{meta_path}: not a JSON object")
    return meta


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise CompiledProgramError(f"program.compiled={path}: not a JSON state ({exc})") from None
    if not isinstance(state, dict):
        raise CompiledProgramError(f"program.compiled={path}: not a JSON object")
    return state


def load_compiled(program: dspy.Module, path: str | Path, fitting: Sequence[str] = ()) -> dspy.Module:
    """Load a saved state into `program` (a subclass of the saved program's class loads it too). `fitting`: the parts
    a compile is about to fit, whose weights the state may lack."""
    path = Path(path)
    if not path.is_file():
        raise CompiledProgramError(f"program.compiled={path}: no such file")
    meta = read_meta(path)
    expected = program_fingerprint(program)
    if meta is not None:
        theirs = meta.get("predictors") or {}
        differ = sorted(n for n in set(theirs) & set(expected) if theirs[n] != expected[n])
        lineage = [cls.__name__ for cls in type(program).__mro__]
        if meta.get("program") not in lineage or differ:
            raise CompiledProgramError(
                f"{path} was compiled for {meta.get('program')} with predictors {sorted(theirs)}; this is "
                f"{type(program).__name__} with {sorted(expected)}" + (f" (other fields: {differ})" if differ else "")
                + ": compile it again for this program")
    state = _read_state(path)
    missing = sorted(name for name in learned_parameters(program) if name not in state
                     and not any(name == part or name.startswith(f"{part}.") for part in fitting))
    if missing:
        raise CompiledProgramError(f"program.compiled={path}: holds no {', '.join(missing)} (the learned weights this "
                                   "program's stages need); compile them: task=compile optimizer=finetune (the question "
                                   "adapter), optimizer=logistic (the heads) or optimizer=fit (the grounding verifier: "
                                   "experiment=compile_reader_verifier; experiment=reader_verifier runs with the "
                                   "shipped one)")
    try:
        load_all_or_nothing(dict(program.named_parameters()), state)
    except ClinprogError as exc:
        raise CompiledProgramError(f"program.compiled={path}: {exc}") from None
    except Exception as exc:  # a Predict's state of another shape
        raise CompiledProgramError(f"{path}: cannot be loaded into {type(program).__name__}: "
                                   f"{type(exc).__name__}: {exc}") from None
    return program  # not marked `_compiled`: as with DSPy's load(), only a compile does


def load_program_state(program: dspy.Module, cfg: Any) -> dspy.Module:
    """`program.compiled` loaded into `program` where the config names one (every contract's `build`). A compile that
    fits some parts (`optimizer.teleprompter.only`) may start from a state without their weights."""
    path = cfg.program.get("compiled")
    if not path:
        return program
    compiling = (cfg.get("task") or {}).get("_target_") == "runners.program.compile_task"
    only = ((cfg.get("optimizer") or {}).get("teleprompter") or {}).get("only") if compiling else None
    return load_compiled(program, path, list(only or ()))


def load_all_or_nothing(params: dict[str, Any], state: dict[str, Any]) -> None:
    """Each parameter's state is loaded into a shallow copy first; only when every one loaded are the copies moved
    into the program's parameters, so a state that fails on its last parameter changes nothing."""
    loaded = []
    for name, param in params.items():
        if name in state:
            trial = copy.copy(param)
            trial.load_state(state[name])
            loaded.append((param, trial))
    for param, trial in loaded:
        param.__dict__.update(trial.__dict__)


def load_module_state(module: dspy.Module, path: str | Path, prefix: str) -> dspy.Module:
    """The state of one stage of a saved program (its parameters under `prefix.`), for a stage built alone."""
    state = _read_state(Path(path))
    params = dict(module.named_parameters())
    try:
        load_all_or_nothing(params, {name: state[f"{prefix}.{name}"] for name in params if f"{prefix}.{name}" in state})
    except ClinprogError as exc:
        raise CompiledProgramError(f"{path}: {exc}") from None
    return module


def fitted_knobs(config: dict[str, Any]) -> dict[str, Any]:
    """A run's resolved config with each stage knob left null replaced by "fitted: <value>", the value its
    compiled state holds (for config.json). A state that cannot be read changes nothing here."""
    program = config.get("program") or {}
    path = program.get("compiled")
    try:
        state = _read_state(Path(path)) if path else {}
    except (ClinprogError, OSError, ValueError):
        return config
    for name, part in state.items():
        # "evidence.scorer" -> program.evidence; "_grounding.verifier.weights" -> program.grounding.verifier
        first, *inner = name.split(".")[:-1] or [name]
        stage = program.get(first.lstrip("_"))
        for key in inner:
            stage = stage.get(key) if isinstance(stage, dict) and isinstance(stage.get(key), dict) else stage
        selection = part.get("selection") if isinstance(part, dict) else None
        if not isinstance(stage, dict) or not isinstance(selection, dict):
            continue
        for knob, value in selection.items():
            if knob in stage and stage[knob] is None:
                stage[knob] = f"fitted: {value}"
    return config
