"""Cross-encoder reranking (the seed: MedCPT cross-encoder, top 20 of 50)."""

from __future__ import annotations

import threading
from dataclasses import replace

from common.packaged import resolve_model_path
from retrieval.passage import Passage, RetrievalError


class CrossEncoderReranker:
    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32, device: str = "cpu") -> None:
        self.model_name = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                try:
                    self._model = CrossEncoder(resolve_model_path(self.model_name), max_length=self.max_length,
                                               device=self.device, num_labels=1)
                except Exception as exc:
                    raise RetrievalError(f"reranker {self.model_name!r} cannot be loaded here: {exc}".splitlines()[0]) from exc
        return self._model

    def rerank(self, query: str, passages: list[Passage], k: int) -> list[Passage]:
        if not passages:
            return []
        scores = self._load().predict([(query, p.format()) for p in passages], batch_size=self.batch_size,
                                      show_progress_bar=False)
        ranked = sorted(zip(passages, scores, strict=True), key=lambda x: -float(x[1]))
        return [replace(p, score=float(s), metadata={**p.metadata, "first_stage_score": p.score}) for p, s in ranked[:k]]
