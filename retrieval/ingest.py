"""Ingestion: corpus -> chunks -> (skip ids already indexed) -> batched embeddings -> backend; resumable, idempotent."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from retrieval.corpus import Chunk, CorpusSpec, corpus_hash, iter_chunks, resolve_paths
from retrieval.embed import Embedder
from retrieval.passage import RetrievalError


class SearchBackend(Protocol):
    """What `Retriever` needs from a backend (local FAISS+BM25, Weaviate)."""

    def search_batch(self, queries: list[str], k: int) -> list[list[Any]]: ...
    def check_embedder(self) -> None: ...


class IngestBackend(Protocol):
    def prepare(self, corpus: str, corpus_hash: str) -> list[str]: ...  # what an interrupted ingest left, repaired
    def existing_ids(self, ids: list[str]) -> set[str]: ...
    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None: ...
    def finalize(self) -> dict[str, Any]: ...
    def consistent(self) -> list[str]: ...  # what lags behind the stored chunks (empty: consistent)


@dataclass
class IngestReport:
    corpus: str
    chunks: int
    added: int
    skipped: int
    failed: int
    seconds: float
    finalize: dict[str, Any] | None = None
    duplicates_skipped: int = 0
    repaired: list[str] | None = None


def ingest(spec: CorpusSpec, backend: IngestBackend, embedder: Embedder, *, batch_size: int = 256,
           progress: bool = True) -> IngestReport:
    start = time.perf_counter()
    repaired = backend.prepare(spec.name, corpus_hash(resolve_paths(spec))) or []
    duplicates: list[str] = []
    chunks = list(iter_chunks(spec, duplicates))
    seen: set[str] = set()
    unique = [c for c in chunks if not (c.id in seen or seen.add(c.id))]
    added = skipped = failed = 0
    bar = tqdm(total=len(unique), desc=f"index {spec.name}", unit="chunk", disable=not progress)
    for i in range(0, len(unique), batch_size):
        batch = unique[i : i + batch_size]
        existing = backend.existing_ids([c.id for c in batch])
        new = [c for c in batch if c.id not in existing]
        skipped += len(batch) - len(new)
        if new:
            vectors = embedder.encode_documents([c.embedding_text() for c in new])
            result = backend.add(new, vectors)
            failed += int(result or 0)  # backends that can lose objects (Weaviate) report how many
            added += len(new) - int(result or 0)
        bar.update(len(batch))
    bar.close()
    # Rebuild when something was added or anything lags behind the stored chunks (an interrupted finalize)
    lagging = backend.consistent()
    final = backend.finalize() if added or lagging else None
    if lagging and not added:
        # Nothing new, yet the derived files lag: an earlier finalize was interrupted (after an add they always lag).
        repaired.extend(lagging)
    still = backend.consistent()
    if still:
        raise RetrievalError(f"index {spec.name}: still inconsistent after the ingest ({'; '.join(still)})")
    return IngestReport(spec.name, len(unique), added, skipped, failed, time.perf_counter() - start, final,
                        len(duplicates), repaired)
