"""A Hydra multirun in which one job fails still runs every other job, then says which failed and exits non-zero.
A failed job writes a `failed.json` marker into its folder (`job_failed`); the launching process's
`MultirunFailuresCallback` lists them at the end. Going through the job folders, it works with every launcher."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from common import json_input
from common.outputs import in_multirun, record_failure, write_text

MARKER = "failed.json"


def job_failed(line: str, unexpected: bool = False) -> bool:
    """In a multirun job: record `line` for the sweep's summary and return True (the task then returns instead of
    exiting, so the next job runs). Outside a multirun: False."""
    if not in_multirun():
        return False
    from hydra.core.hydra_config import HydraConfig

    hydra = HydraConfig.get()
    num = hydra.job.get("num")
    message = line.removeprefix("error: ")
    print(f"multirun job #{num} failed (the sweep goes on; each failed job is listed at its end): {message}",
          file=sys.stderr)
    record_failure(line)
    out = Path(hydra.runtime.output_dir)
    record = {"job": num, "overrides": list(hydra.overrides.task), "error": line, "unexpected": unexpected}
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / MARKER, json.dumps(record, indent=2) + "\n")
    except OSError as exc:  # the line above still said it; the summary cannot
        print(f"multirun job #{num}: cannot write {out / MARKER} ({exc})", file=sys.stderr)
    return True


def failed_jobs(markers: Iterable[Path], since: float | None = None) -> list[tuple[Path, dict | None]]:
    """(job folder, its failed.json record; None when it cannot be read) of each marker written after `since`, in
    job order."""
    out: list[tuple[Path, dict | None]] = []
    for marker in markers:
        try:
            if since is not None and marker.stat().st_mtime < since:
                continue
            record = json_input.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        out.append((marker.parent, record if isinstance(record, dict) else None))

    def number(item: tuple[Path, dict | None]) -> tuple[int, str]:
        job = (item[1] or {}).get("job")
        return (int(job), "") if isinstance(job, int) else (sys.maxsize, str(item[0]))

    return sorted(out, key=number)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def varying(job_overrides: list[str], sweep_overrides: list[str]) -> list[str]:
    """The job's overrides less those the whole sweep fixed: what tells this job from the others."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(sweep_overrides)
        fixed = {_key(o.input_line or "") for o in parsed if not o.is_sweep_override()}
    except Exception:  # noqa: BLE001 - naming every override is still right
        fixed = set()
    named = [o for o in job_overrides if _key(o) not in fixed]
    return named or list(job_overrides)


class MultirunFailuresCallback(Callback):
    """After a multirun: one `error:` line per failed job, then exit code 2 (1 where a failure was a bug)."""

    def __init__(self) -> None:
        self.started = time.time()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.started = time.time()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:  # a rerun into the folder of a job that failed before: that failure is not this run's
            (Path(str(config.hydra.runtime.output_dir)) / MARKER).unlink(missing_ok=True)
        except Exception:  # noqa: BLE001 - no folder yet, or a single run: nothing to drop
            pass

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(str(config.hydra.sweep.dir))
        # markers an earlier sweep into the same folder left are older than this one
        failures = [(f, r) for f, r in failed_jobs(sweep.rglob(MARKER) if sweep.is_dir() else (), self.started - 2)
                    if r is not None]
        if not failures:
            return
        sweep_overrides = list(config.hydra.overrides.get("task") or [])
        for folder, record in failures:
            named = " ".join(varying([str(o) for o in record.get("overrides") or []], sweep_overrides))
            error = str(record.get("error") or "failed").removeprefix("error: ")
            print(f"error: multirun job #{record.get('job')} ({named}) failed: {error} (its folder: {folder})",
                  file=sys.stderr)
        jobs = self._jobs(sweep)
        total = f" of {jobs}" if jobs >= len(failures) else ""
        print(f"{len(failures)}{total} multirun jobs failed; the others finished (outputs under {sweep})",
              file=sys.stderr)
        raise SystemExit(1 if any(r.get("unexpected") for _, r in failures) else 2)

    def _jobs(self, sweep: Path) -> int:
        """The jobs of this sweep: folders whose Hydra overrides.yaml was written since it started (0: unknown)."""
        count = 0
        for path in sweep.rglob("overrides.yaml"):
            if path.parent.name != ".hydra" or "previous" in path.relative_to(sweep).parts:  # run.resume=restart's
                continue
            try:
                count += path.stat().st_mtime >= self.started - 2
            except OSError:
                continue
        return count
