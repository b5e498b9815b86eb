"""Cosine similarities with the program's one shared embedder."""

from __future__ import annotations

import numpy as np

from retrieval.embed import Embedder


def cosine_matrix(embedder: Embedder, left: list[str], right: list[str]) -> np.ndarray:
    """Rows: `left` texts, columns: `right` texts (embeddings are L2-normalised, so a dot product is the cosine)."""
    a = embedder.encode_queries(left)
    b = embedder.encode_documents(right)
    return a @ b.T
