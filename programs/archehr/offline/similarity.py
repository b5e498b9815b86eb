"""Cosine similarities with the retrieval module's embedder (one loaded model shared by the offline stages)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from retrieval.embed import Embedder


@lru_cache(maxsize=4)
def shared_embedder(model: str) -> Embedder:
    return Embedder(model, max_seq_length=256)


def cosine_matrix(model: str, left: list[str], right: list[str]) -> np.ndarray:
    """Rows: `left` texts, columns: `right` texts (embeddings are L2-normalised, so a dot product is the cosine)."""
    emb = shared_embedder(model)
    a = emb.encode_queries(left)
    b = emb.encode_documents(right)
    return a @ b.T
