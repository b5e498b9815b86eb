"""A file's identity: its version (path, size, modification time) for process-level caches, its content hash for
fingerprints."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def file_version(path: str | Path) -> tuple[str, int, int]:
    """A file as a process-level cache keys it: (resolved path, size, modification time in ns); a file rewritten or
    replaced is another version. OSError where it cannot be read."""
    stat = os.stat(path)
    return str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
