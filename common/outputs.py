"""A task's output folder and how files are written into it: atomically (write-then-rename), JSON without NaN, the
run's own main.log line, and a failed run's tidy-up."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any


def output_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside @hydra.main (tests, notebooks)
        path = Path("outputs/adhoc")
        path.mkdir(parents=True, exist_ok=True)
        return path


def append_main_log(out: Path, line: str) -> None:
    """A line for the run's own record (Hydra's main.log): why it stopped, next to its log lines."""
    with open(out / "main.log", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def in_multirun() -> bool:
    """True inside a job of a Hydra multirun."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:  # not under @hydra.main
        return False


def record_failure(line: str) -> None:
    """The error line goes to the run's main.log too; a run folder holding nothing of the run's own is removed (but
    a multirun job's, whose main.log says why that job failed)."""
    try:
        out = output_dir()
    except Exception:  # noqa: BLE001 - no run folder to speak of
        return
    # Hydra's files and what a run writes before its first prediction: nothing to resume or look at.
    no_content = {".hydra", "main.log", "fingerprint.json"}
    if not in_multirun() and out.is_dir() and all(
            p.name in no_content or (p.name == "predictions.jsonl" and p.stat().st_size == 0) for p in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)
        for parent in _default_layout_parents(out):  # outputs/<task>/ and outputs/, when this was their only run
            with contextlib.suppress(OSError):
                parent.rmdir()  # only ever removes an empty folder
        return
    append_main_log(out, line)


def _default_layout_parents(out: Path) -> list[Path]:
    """`outputs/<task>/` and `outputs/` of the working directory when `out` is a run folder of the default layout;
    none otherwise (an empty folder above one the command chose is the user's)."""
    outputs = Path.cwd().resolve() / "outputs"
    task = out.resolve().parent
    return [task, outputs] if task.parent == outputs else []


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(_clean(data), indent=2, ensure_ascii=False) + "\n")


def write_text(path: Path, text: str) -> None:
    """Write-then-rename: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
