"""Ingestion: corpus -> chunks -> (drop changed and removed documents, skip ids already indexed) -> batched
embeddings -> backend; resumable, idempotent, one writer at a time (a backend's `writing()` context, if any).
A backend that tracks documents (the local index) loses a changed or removed document's chunks first."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from retrieval.corpus import Chunk, CorpusSpec, corpus_hash, doc_hashes, iter_chunks, resolve_paths
from retrieval.embed import Embedder
from retrieval.passage import RetrievalError


class SearchBackend(Protocol):
    """What `Retriever` needs from a backend (local FAISS+BM25, Weaviate)."""

    def search_batch(self, queries: list[str], k: int) -> list[list[Any]]: ...
    def check_embedder(self) -> None: ...


class IngestBackend(Protocol):
    # what an interrupted ingest left, repaired; `reindex`: the overrides that index this corpus again
    def prepare(self, corpus: str, corpus_hash: str, reindex: list[str] | None = None) -> list[str]: ...
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
    changed_docs: int = 0      # documents whose content changed since they were indexed: old chunks removed
    removed_docs: int = 0      # documents no longer in the corpus: their chunks removed
    removed_chunks: int = 0


def ingest(spec: CorpusSpec, backend: IngestBackend, embedder: Embedder, *, batch_size: int = 256,
           progress: bool = True, reindex: list[str] | None = None) -> IngestReport:
    writing = getattr(backend, "writing", None)
    with writing() if writing else nullcontext():
        return _ingest(spec, backend, embedder, batch_size, progress, reindex)


def _ingest(spec: CorpusSpec, backend: IngestBackend, embedder: Embedder, batch_size: int, progress: bool,
            reindex: list[str] | None) -> IngestReport:
    start = time.perf_counter()
    files = resolve_paths(spec)
    duplicates: list[str] = []
    chunks = list(iter_chunks(spec, duplicates))
    seen: set[str] = set()
    unique = [c for c in chunks if not (c.id in seen or seen.add(c.id))]
    if not unique:  # an empty or mis-pointed corpus must not wipe what the index holds for this name
        raise RetrievalError(f"corpus {spec.name}: no document with text in {', '.join(map(str, files))}; nothing "
                             "indexed, nothing removed")
    repaired = backend.prepare(spec.name, corpus_hash(files), reindex) or []
    current = doc_hashes(unique)
    changed: list[str] = []
    gone: list[str] = []
    removed_chunks = 0
    tracks = hasattr(backend, "stored_doc_hashes")
    if tracks:
        stored = backend.stored_doc_hashes(spec.name, current)
        changed = [d for d, h in current.items() if d in stored and stored[d] != h]
        gone = [d for d in stored if d not in current]
        removed_chunks = backend.remove_docs(spec.name, changed + gone)
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
    if tracks:
        backend.record_doc_hashes(spec.name, current)
    # Rebuild when something was added or anything lags behind the stored chunks (an interrupted finalize)
    lagging = backend.consistent()
    final = backend.finalize() if added or removed_chunks or lagging else None
    if lagging and not added and not removed_chunks:
        # Nothing new, yet the derived files lag: an earlier finalize was interrupted (after an add they always lag).
        repaired.extend(lagging)
    still = backend.consistent()
    if still:
        raise RetrievalError(f"index {spec.name}: still inconsistent after the ingest ({'; '.join(still)})")
    return IngestReport(spec.name, len(unique), added, skipped, failed, time.perf_counter() - start, final,
                        len(duplicates), repaired, len(changed), len(gone), removed_chunks)
