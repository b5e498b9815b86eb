"""Vectors kept in DSPy's cache by text, as DSPy keeps an LM's replies (the sentence embedder's, the LM reader's).
Each source names its `kind` and the digest of the code that computes them, so a change of code computes afresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def cpu_flags() -> str:
    """The instruction sets this CPU reports (the kernels torch and llama.cpp use are chosen by them)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


class VectorStore:
    """Get and put float32 vectors by (documents, text) in DSPy's cache for one setting (`identity`)."""

    def __init__(self, identity: dict[str, Any], kind: str, digest: Callable[[], str]) -> None:
        self.identity, self.kind, self.digest = identity, kind, digest

    def _request(self, documents: bool, text: str) -> dict[str, Any]:
        return {"kind": self.kind, "encoder": self.digest(), **self.identity, "documents": documents, "text": text}

    def get(self, keys: list[tuple[bool, str]]) -> dict[tuple[bool, str], np.ndarray]:
        import dspy

        found = {}
        for key in keys:
            stored = dspy.cache.get(self._request(*key))
            if isinstance(stored, bytes) and stored and len(stored) % 4 == 0:
                found[key] = np.frombuffer(stored, dtype=np.float32).copy()
        return found

    def put(self, keys: list[tuple[bool, str]], vectors: np.ndarray) -> None:
        import dspy

        for key, vector in zip(keys, np.asarray(vectors, dtype=np.float32), strict=True):
            dspy.cache.put(self._request(*key), vector.tobytes())
