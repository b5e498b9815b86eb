"""A run folder that one run holds at a time (`run.lock`) and that never mixes outputs of two configurations
(`fingerprint.json`: a rerun resumes only when it matches); docs/reliability.md."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from common import json_input
from common.errors import ClinprogError, RunFolderError
from common.flatten import flatten
from common.outputs import write_text

log = logging.getLogger(__name__)
RESUME_MODES = ("auto", "restart", "force")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError):  # OverflowError: a hand-written number no PID can be
        return False
    return True


def process_identity(pid: int) -> dict[str, str] | None:
    """A live process's start time (/proc/<pid>/stat field 22) and command line: with the PID they name one process
    for good, so a reused PID is told apart. None where /proc cannot say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and parentheses
    return {"start": fields[19] if len(fields) > 19 else "", "command": command_line(command)}


def command_line(raw: bytes, limit: int = 300) -> str:
    """/proc/<pid>/cmdline as a shell line of whole arguments, quoted, up to about `limit` characters, then how many
    arguments were left out (a cut mid-argument would name a file that does not exist)."""
    import shlex

    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    shown: list[str] = []
    for arg in args:
        part = shlex.quote(arg)
        if shown and len(" ".join(shown)) + 1 + len(part) > limit:
            break
        shown.append(part)
    rest = len(args) - len(shown)
    return " ".join(shown) + (f" ... ({rest} more argument{'s' if rest != 1 else ''})" if rest else "")


class RunLock:
    """An exclusive lock file (O_EXCL) holding the owner's PID, start time and command; a lock whose owner is gone,
    or whose PID now names another process, is stale and taken over with a warning."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "run.lock"
        self.held = False

    def acquire(self) -> None:
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self._owner()
                stale = self._stale(owner)
                if stale is None:
                    assert owner is not None
                    command = f": {owner['command']}" if owner.get("command") else ""
                    raise RunFolderError(f"{self.path.parent} is in use by another run (PID {owner['pid']}{command}); "
                                         "wait for it to finish or run into another folder (omit hydra.run.dir); if "
                                         f"no run uses this folder, delete {self.path}") from None
                log.warning("%s: taking over a stale lock (%s)", self.path, stale)
                self.path.unlink(missing_ok=True)
                continue
            me = {"pid": os.getpid(), **(process_identity(os.getpid()) or {}), "folder": str(self.path.parent)}
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(me) + "\n")
            self.held = True
            return
        raise RunFolderError(f"{self.path}: cannot take the run lock")

    def _owner(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
            owner = json.loads(text) if text.startswith("{") else {"pid": int(text.split()[0])}  # older: a PID only
            owner["pid"] = int(owner["pid"])
            return owner
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            return None  # gone, or half-written: its writer died between create and write

    @staticmethod
    def _stale(owner: dict[str, Any] | None) -> str | None:
        """Why the lock is stale, or None when a live run holds it."""
        if owner is None:
            return "an unreadable or half-written lock"
        pid = owner["pid"]
        if pid == os.getpid():
            return f"PID {pid} is this process"
        if pid <= 0 or not _pid_alive(pid):
            return f"PID {pid} is no longer running"
        now = process_identity(pid)
        if now is None:  # no /proc (macOS): a live PID is taken as the owner
            return None
        if owner.get("start"):
            return f"PID {pid} is now another process ({now['command'] or 'no command line'})" \
                if owner["start"] != now["start"] else None
        if "main.py" not in now["command"] and "clinprog" not in now["command"]:  # a PID written by hand
            return f"PID {pid} is not a clinprog run ({now['command'] or 'no command line'})"
        return None

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def differences(old: dict[str, Any], new: dict[str, Any], limit: int = 4) -> list[str]:
    """The changed keys, one line each."""
    a, b = flatten(old), flatten(new)
    diffs = [f"{k}: {a.get(k, '(unset)')!r} -> {b.get(k, '(unset)')!r}"
             for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return diffs[:limit] + ([f"... {len(diffs) - limit} more"] if len(diffs) > limit else [])


class RunFolder:
    """Hold `folder` for one run: the lock, then the fingerprint check against earlier predictions."""

    def __init__(self, folder: str | Path, fingerprint: dict[str, Any], resume: str = "auto") -> None:
        if resume not in RESUME_MODES:
            raise ClinprogError(f"run.resume must be one of {RESUME_MODES}, not {resume!r}")
        self.folder = Path(folder)
        self.fingerprint = json.loads(json.dumps(fingerprint, default=str))
        self.resume = resume
        self.predictions = self.folder / "predictions.jsonl"
        self.lock = RunLock(self.folder)

    def __enter__(self) -> RunFolder:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.lock.acquire()
            self._check_fingerprint()
        except BaseException as exc:
            self.lock.release()  # nothing to release when acquire() raised: it sets `held` last
            if isinstance(exc, RunFolderError):  # a busy or refused folder keeps the files of the run that holds it
                restore_hydra_files(self.folder)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def _check_fingerprint(self) -> None:
        path = self.folder / "fingerprint.json"
        old = None
        if path.exists():
            try:
                old = json_input.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = {"unreadable": str(path)}
        has_records = self.predictions.exists() and self.predictions.stat().st_size > 0
        if has_records and old != self.fingerprint:
            what = differences(old or {}, self.fingerprint) if old else ["no fingerprint.json (made by an older clinprog)"]
            if self.resume == "auto":
                raise RunFolderError(f"{self.folder} holds predictions of a different run ({'; '.join(what)}); rerun "
                                     "into a new folder (omit hydra.run.dir), or add run.resume=restart to move "
                                     "its outputs to previous/ and start fresh, or run.resume=force to keep them")
            if self.resume == "restart":
                moved = self.set_aside()
                log.warning("run.resume=restart: the earlier run's outputs moved to %s", moved)
            else:
                log.warning("run.resume=force: resuming predictions made with a different run (%s)", "; ".join(what))
        write_text(path, json.dumps(self.fingerprint, indent=2, sort_keys=True) + "\n")

    def set_aside(self) -> Path:
        """Move every output of the earlier run (and its Hydra config) into `previous/<time>/`, predictions last, so
        a restart killed halfway is finished by the next one."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.folder / "previous" / stamp
        n = 1
        while target.exists():
            n += 1
            target = self.folder / "previous" / f"{stamp}-{n}"
        target.mkdir(parents=True)
        outputs = sorted({p for pattern in OUTPUTS for p in self.folder.glob(pattern) if p.is_file()}) + \
            [p for p in (self.folder / f"{self.predictions.name}.torn", self.predictions) if p.exists()]
        earlier_hydra = HYDRA_FILES_BEFORE.get(self.folder.resolve())
        if earlier_hydra:  # the earlier run's .hydra/*.yaml, as Hydra found them before this run rewrote them
            (target / ".hydra").mkdir()
            for name, data in earlier_hydra.items():
                if data is not None:
                    (target / ".hydra" / name).write_bytes(data)
        for path in outputs:
            os.replace(path, target / path.name)
        return target


# What a run writes into its folder besides predictions and Hydra's main.log and .hydra/ (run.resume=restart moves them)
OUTPUTS = ("fingerprint.json", "scores.json", "usage.json", "config.json", "report.md", "report.html", "submission*",
           "*.tmp")
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")
# .hydra/*.yaml of each run folder as they were before Hydra wrote this run's (None: absent), by resolved folder
HYDRA_FILES_BEFORE: dict[Path, dict[str, bytes | None]] = {}


def remember_hydra_files(folder: Path, subdir: str = ".hydra") -> None:
    if not (folder / subdir).is_dir():
        return
    HYDRA_FILES_BEFORE[folder.resolve()] = {
        name: (folder / subdir / name).read_bytes() if (folder / subdir / name).is_file() else None
        for name in HYDRA_FILES}


def restore_hydra_files(folder: Path, subdir: str = ".hydra") -> None:
    """Put back the .hydra/*.yaml Hydra rewrote for a run the folder refused (they describe the run that is there)."""
    before = HYDRA_FILES_BEFORE.get(folder.resolve())
    if before is None:
        return
    for name, data in before.items():
        path = folder / subdir / name
        if data is None:
            path.unlink(missing_ok=True)
        else:
            tmp = path.with_name(name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)


def folder_problem(key: str, folder: Path) -> str | None:
    """Why `folder` cannot hold a run's outputs (it or a folder above it is a file, it cannot be written), or None.
    Creates it (Hydra would, next)."""
    for above in (folder, *folder.parents):
        if above.exists():
            if not above.is_dir():
                what = f"{key}={folder} is a file" if above == folder else f"{key}={folder}: {above} is a file"
                return f"{what}, not a folder; choose a folder for the run's outputs"
            break
    probe = folder / f".clinprog-write-check-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.touch()
        probe.unlink()
    except OSError as exc:
        return f"{key}={folder}: cannot create or write that folder ({exc.strerror or exc}); choose a folder " \
               "the run can write its outputs to"
    return None


def shard_folder_clash(folder: Path, dirs: Any) -> str | None:
    """task=merge: why `folder` cannot hold the merged run (it is one of the shard folders `dirs`), or None."""
    if not dirs or isinstance(dirs, str):
        return None
    for shard in dirs:
        if Path(str(shard)).resolve() == folder.resolve():
            return f"hydra.run.dir={folder} is the shard folder {shard} of dirs: the merge would overwrite it; merge " \
                   "into another folder (omit hydra.run.dir)"
    return None


def _refuse(problem: str | None) -> None:
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(2)


class RunFolderCallback(Callback):
    """Hydra callback (conf/config.yaml), run before Hydra writes into the run folder: refuses a folder that cannot be
    one, and keeps its earlier .hydra files so a refused rerun can put them back."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = Path(str(config.hydra.run.dir))
        if config.hydra.runtime.choices.get("task") == "merge":
            _refuse(shard_folder_clash(folder, config.get("dirs")))
        _refuse(folder_problem("hydra.run.dir", folder))
        if config.hydra.get("output_subdir"):
            remember_hydra_files(folder, str(config.hydra.output_subdir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = Path(str(config.hydra.sweep.dir))
        _refuse(folder_problem("hydra.sweep.dir", sweep))
        if config.hydra.get("output_subdir") and sweep.is_dir():
            for job in sweep.iterdir():
                if job.is_dir():
                    remember_hydra_files(job, str(config.hydra.output_subdir))
