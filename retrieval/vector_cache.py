"""Sentence vectors in DSPy's cache (`cache_dir`), so another process does not load torch and the model (~2.5 CPU-s)
to embed the same sentences again. The key holds all a vector depends on: the text, the settings, the model's files,
the encoder's source, the torch version and the CPU's kernels. A hub model is not kept: its files are unknown."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from common.files import file_version
from common.vector_store import VectorStore as SharedVectorStore
from common.vector_store import cpu_flags

KIND = "clinprog.embedder.vector"
# the modules whose code decides a vector (their source is part of the key)
ENCODER_SOURCES = (Path(__file__).with_name("embed.py"), Path(__file__).with_name("bert_encoder.py"))
KERNEL_CAPS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE")


@lru_cache(maxsize=1)
def encoder_digest() -> str:
    """sha256 over the encoder's source, the torch version and this CPU's kernel choice (flags and caps); computed
    without importing torch (a process whose texts all hit never loads it)."""
    digest = hashlib.sha256()
    for path in ENCODER_SOURCES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    digest.update(torch_version.encode() + b"\0" + cpu_flags().encode() + b"\0")
    for name in KERNEL_CAPS:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    return digest.hexdigest()


def model_files(folder: str) -> list[list[Any]] | None:
    """Each file of a local model folder as (path, size, mtime_ns), sorted; None for a hub model (not kept)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        return None
    try:
        return sorted([*file_version(p)] for p in root.rglob("*") if p.is_file())
    except OSError:  # a file vanished while the folder was read: keep nothing rather than a wrong key
        return None


class VectorStore(SharedVectorStore):
    """Get and put unit vectors by text in DSPy's cache for one embedder setting (`identity`)."""

    def __init__(self, identity: dict[str, Any]) -> None:
        super().__init__(identity, KIND, encoder_digest)
