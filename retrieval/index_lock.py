"""One writer per index folder: `task=index` holds `flock` on `<index>/index.lock` (released by the kernel however
it exits; the file's text only says who holds it). A second writer waits up to `timeout_s`, then stops with one line.
Readers never take the lock; `holder()` explains an index that is mid-update."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retrieval.passage import RetrievalError

LOCK_FILE = "index.lock"


def holder_text(info: dict | None) -> str:
    """`pid 123, started 2026-01-01T10:00:00` from the lock file's text (or what is known of it)."""
    if not info:
        return "another process"
    return f"pid {info.get('pid', '?')}, started {info.get('started', '?')}"


def _read_info(path: Path) -> dict | None:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def holder(index_dir: str | Path) -> dict | None:
    """Who is writing the index now (the lock file's text), or None when no writer holds it. Never creates files."""
    path = Path(index_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(path) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def index_lock(index_dir: str | Path, timeout_s: float = 3600.0, poll_s: float = 0.2) -> Iterator[None]:
    """Hold the index's write lock for the body; wait up to `timeout_s` for another writer, then refuse."""
    folder = Path(index_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(0.0, timeout_s)
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                info = _read_info(path)
                if time.monotonic() >= deadline:
                    raise RetrievalError(
                        f"index {folder} is being written by another task=index ({holder_text(info)}; lock {path}); "
                        f"run this again when it has finished (waited {timeout_s:g} s, "
                        "retriever.backend.lock_timeout_s)") from None
                if not announced:
                    print(f"index {folder} is being written by another task=index ({holder_text(info)}): waiting up to "
                          f"{timeout_s:g} s for it to finish", file=sys.stderr, flush=True)
                    announced = True
                time.sleep(poll_s)
        info = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "command": " ".join(sys.argv)[:500]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
