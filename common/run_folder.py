"""A run folder that one run holds at a time and that never mixes predictions of two configurations.

- `run.lock` holds the PID of the run using the folder; a second run refuses with one line. A lock left by a dead
  process (kill -9, power loss) is taken over with a warning.
- `fingerprint.json` records what determines the predictions (program config, input file hashes, compiled state,
  LM identity). Rerunning into the folder resumes only when it matches; otherwise the run refuses with what differs
  (`run.resume=restart` sets the old predictions aside and starts fresh, `run.resume=force` resumes anyway).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from common.errors import ClinprogError, RunFolderError
from common.flatten import flatten

log = logging.getLogger(__name__)
RESUME_MODES = ("auto", "restart", "force")


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """An exclusive lock file holding the owner's PID (O_EXCL create; stale locks of dead PIDs are taken over)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "run.lock"
        self.held = False

    def acquire(self) -> None:
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                if owner is not None and owner != os.getpid() and _pid_alive(owner):
                    raise RunFolderError(f"{self.path.parent} is in use by another run (PID {owner}); wait for it to "
                                         "finish or run into another folder (omit hydra.run.dir)") from None
                log.warning("%s: taking over a stale lock of PID %s (no longer running)", self.path, owner)
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
            self.held = True
            return
        raise RunFolderError(f"{self.path}: cannot take the run lock")

    def _owner(self) -> int | None:
        try:
            return int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None  # a half-written lock file: its writer died between create and write

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


COPIES = ("module", "implementations", "fallbacks")  # config sections that interpolate the user-facing values


def differences(old: dict[str, Any], new: dict[str, Any], limit: int = 4) -> list[str]:
    """The changed keys, one line each; a value the config interpolates into several places (program.offline.x
    reaches the module, the implementations and the fallbacks) is named once, by its shortest key."""
    a, b = flatten(old), flatten(new)
    groups: dict[tuple[str, str, str], list[str]] = {}
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            change = (k.rsplit(".", 1)[-1], repr(a.get(k, "(unset)")), repr(b.get(k, "(unset)")))
            groups.setdefault(change, []).append(k)
    diffs = []
    for (_, before, after), keys in groups.items():
        # the key a user sets, not where the config copies it to (program.module.*, implementations, fallbacks)
        key = min(keys, key=lambda k: (any(f".{part}." in k for part in COPIES), len(k), k))
        more = len(keys) - 1
        diffs.append(f"{key}: {before} -> {after}" + (f" (copied to {more} more key{'s' * (more > 1)})" if more else ""))
    return diffs[:limit] + ([f"... {len(diffs) - limit} more"] if len(diffs) > limit else [])


class RunFolder:
    """Hold `folder` for one run: the lock, then the fingerprint check against earlier predictions."""

    def __init__(self, folder: str | Path, fingerprint: dict[str, Any], resume: str = "auto",
                 predictions: str = "predictions.jsonl") -> None:
        if resume not in RESUME_MODES:
            raise ClinprogError(f"run.resume must be one of {RESUME_MODES}, not {resume!r}")
        self.folder = Path(folder)
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        self.resume = resume
        self.predictions = self.folder / predictions
        self.lock = RunLock(self.folder)

    def __enter__(self) -> RunFolder:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        try:
            self._check_fingerprint()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def _check_fingerprint(self) -> None:
        path = self.folder / "fingerprint.json"
        old = None
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = {"unreadable": str(path)}
        has_records = self.predictions.exists() and self.predictions.stat().st_size > 0
        if has_records and old != self.fingerprint:
            what = differences(old or {}, self.fingerprint) if old else ["no fingerprint.json (made by an older clinprog)"]
            if self.resume == "auto":
                raise RunFolderError(f"{self.folder} holds predictions of a different run ({'; '.join(what)}); rerun "
                                     "into a new folder (omit hydra.run.dir), or add run.resume=restart to set them "
                                     "aside and start fresh, or run.resume=force to keep them")
            if self.resume == "restart":
                stamp = time.strftime("%Y%m%d-%H%M%S")
                moved = self.predictions.with_name(f"{self.predictions.name}.stale-{stamp}")
                os.replace(self.predictions, moved)
                log.warning("run.resume=restart: earlier predictions moved to %s", moved)
            else:
                log.warning("run.resume=force: resuming predictions made with a different run (%s)", "; ".join(what))
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.fingerprint, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
