"""A deterministic bag-of-words embedder, so index tests need no model and their rankings are exact."""

from __future__ import annotations

import hashlib
import re

import numpy as np


class HashEmbedder:
    def __init__(self, dim: int = 64, name: str = "hash-bow") -> None:
        self.dim = dim
        self.name = f"{name}@{dim}"

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for tok in re.findall(r"[a-z0-9]+", text.lower()):
            v[int(hashlib.md5(tok.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def encode_documents(self, texts, show_progress=False):
        return np.stack([self._vec(t) for t in texts]).astype(np.float32)

    def encode_queries(self, texts):
        return self.encode_documents(texts)


def index_at(path):
    """A local index at `path` over the HashEmbedder, BM25 on numpy (no compile step)."""
    from retrieval.local import LocalIndex

    return LocalIndex(path, HashEmbedder(), bm25_backend="numpy")
