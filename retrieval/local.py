"""The embedded (offline, serverless) backend: FAISS dense ANN + bm25s BM25, fused, with text in SQLite.

An index directory:
    manifest.json   embedder name and dimension, corpora (hash), how to re-index each, counts, generation, index type
    store.sqlite    chunks(vid, id, doc_id, title, text, source, metadata): the live chunks; vid = row of vectors.f32
                    docs(corpus, doc_id, hash): each indexed document's content hash (corpus.doc_hash)
                    meta: `generation` (bumped by every change of the chunks) and `next_vid`
    vectors.f32     chunk vectors, float32, appended in vid order; rows of replaced chunks stay, unreferenced
    dense.faiss     vid-mapped FAISS: exact inner product below `hnsw_threshold` chunks, HNSW above
    bm25/           the bm25s index over the live chunk texts, with vids.npy (BM25 position -> vid)
    index.lock      held by the one `task=index` writing the folder (retrieval/index_lock.py)

A changed or removed document loses its chunks and hash in one transaction before the new chunks are added. `add`
appends the vectors before it commits their rows, and `reconcile` cuts back what a crash left; `finalize` renames
each rebuilt file into place, and the manifest's `count` and `generation` are the commit marker."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.corpus import Chunk, chunk_number, chunk_prefix, doc_hash
from retrieval.embed import Embedder
from retrieval.index_lock import holder, holder_text, index_lock
from retrieval.passage import Passage, RetrievalError
from retrieval.repair_command import repair_command

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS chunks (
    vid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, doc_id TEXT, title TEXT, text TEXT, source TEXT, metadata TEXT)""",
    # an index built before document tracking gets these empty (see stored_doc_hashes)
    "CREATE TABLE IF NOT EXISTS docs (corpus TEXT NOT NULL, doc_id TEXT NOT NULL, hash TEXT NOT NULL, "
    "PRIMARY KEY (corpus, doc_id))",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)


def rrf_fuse(rankings: Sequence[Sequence[int]], k: int = 60) -> dict[int, float]:
    """Reciprocal rank fusion: sum over rankings of 1 / (k + rank), rank from 1."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, vid in enumerate(ranking, 1):
            fused[vid] = fused.get(vid, 0.0) + 1.0 / (k + rank)
    return fused


def alpha_fuse(dense: dict[int, float], sparse: dict[int, float], alpha: float) -> dict[int, float]:
    """alpha * dense + (1 - alpha) * bm25, each min-max normalised over its candidates (as Weaviate's hybrid)."""

    def norm(scores: dict[int, float]) -> dict[int, float]:
        if not scores:
            return {}
        lo, hi = min(scores.values()), max(scores.values())
        return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in scores.items()}

    d, s = norm(dense), norm(sparse)
    return {vid: alpha * d.get(vid, 0.0) + (1 - alpha) * s.get(vid, 0.0) for vid in set(d) | set(s)}


def build_dense_index(vectors: np.ndarray, *, hnsw_threshold: int, hnsw_m: int = 32, ef_construction: int = 128,
                      ef_search: int = 128, ids: np.ndarray | None = None):
    """Exact inner product up to `hnsw_threshold` vectors (fast enough, perfect recall), FAISS HNSW above. With `ids`
    (an index's vids), wrapped in an IndexIDMap so that search returns them."""
    import faiss

    n, dim = vectors.shape
    if n > hnsw_threshold:
        inner = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction, inner.hnsw.efSearch = ef_construction, ef_search  # add() reads efConstruction only
        kind = f"hnsw(M={hnsw_m})"
    else:
        inner, kind = faiss.IndexFlatIP(dim), "exact"
    if ids is None:
        inner.add(vectors)
        return inner, kind
    index = faiss.IndexIDMap(inner)
    index.add_with_ids(vectors, np.ascontiguousarray(ids, dtype=np.int64))
    return index, kind


class LocalIndex:
    def __init__(
        self,
        path: str | Path,
        embedder: Embedder,
        *,
        mode: str = "hybrid",                 # hybrid | dense | bm25
        fusion: str = "alpha",                # alpha | rrf
        rrf_k: int = 60,
        alpha: float = 0.5,
        candidates: int = 100,                # per retriever, before fusion
        hnsw_threshold: int = 50_000,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 192,
        bm25_backend: str = "numba",
        stemmer: str | None = "english",
        lock_timeout_s: float = 3600.0,       # a second task=index waits this long for the first, then refuses
    ) -> None:
        if mode not in ("hybrid", "dense", "bm25") or fusion not in ("rrf", "alpha"):
            raise RetrievalError(f"retriever: mode must be hybrid|dense|bm25 and fusion rrf|alpha, not {mode}/{fusion}")
        self.path = Path(path)
        self.embedder = embedder
        self.mode, self.fusion, self.rrf_k, self.alpha, self.candidates = mode, fusion, rrf_k, alpha, candidates
        self.hnsw_threshold, self.hnsw_m = hnsw_threshold, hnsw_m
        self.ef_construction, self.ef_search = ef_construction, ef_search
        self.bm25_backend, self.stemmer_name = bm25_backend, stemmer
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._dense = None
        self._bm25 = None
        self._bm25_vids: np.ndarray | None = None  # BM25 position -> vid; None: an index built before vid maps
        self._manifest: dict[str, Any] | None = None

    # ---------------------------------------------------------------- manifest and storage
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def manifest(self) -> dict[str, Any]:
        if self._manifest is None:
            if not self.manifest_path.exists():
                where = "" if self.path == Path("indexes/default") else f" index_dir={self.path}"
                raise RetrievalError(f"no index at {self.path}: build one with `python main.py task=index "
                                     f"corpus=...{where}`")
            try:
                manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
                if not isinstance(manifest, dict) or "embedder" not in manifest or "dim" not in manifest:
                    raise ValueError("not a clinprog index manifest")
            except (OSError, ValueError) as exc:
                raise RetrievalError(f"{self.manifest_path}: unreadable manifest ({exc}); rebuild the index: "
                                     f"remove {self.path} and run `python main.py task=index corpus=...`") from None
            self._manifest = manifest
        return self._manifest

    def _repair_hint(self) -> str:
        """The commands that rebuild this index: one `task=index` per corpus, with the overrides it recorded."""
        manifest = self._manifest or {}
        recorded = manifest.get("reindex") or {}
        commands = [repair_command(recorded.get(name), name, self.path) for name in manifest.get("corpora", {})]
        runs = " then ".join(f"`{c}`" for c in commands or [repair_command(None, None, self.path)])
        return f"{runs} repairs it (or remove the folder and re-index)"

    def check_embedder(self) -> None:
        m = self.manifest()
        if m["embedder"] != self.embedder.name or int(m["dim"]) != self.embedder.dim:
            raise RetrievalError(
                f"index at {self.path} was built with embedder {m['embedder']} (dim {m['dim']}); this run uses "
                f"{self.embedder.name} (dim {self.embedder.dim}). Query with the same embedder, or re-index.")

    def check_searchable(self) -> None:
        """The index can answer a search: built with this run's embedder, and no part of it lagging behind its stored
        chunks (a `task=index` still writing, or one killed mid-way). Counts and sizes only."""
        self.check_embedder()
        lagging = self.consistent()
        if lagging:
            writer = holder(self.path)
            if writer is not None:  # mid-ingest, not damaged
                raise RetrievalError(f"index at {self.path} is being updated by task=index ({holder_text(writer)}); "
                                     "search again when it has finished")
            raise RetrievalError(f"index at {self.path} is inconsistent ({'; '.join(lagging)}); {self._repair_hint()}")

    def _conn(self, create: bool = False) -> sqlite3.Connection:
        if self._db is None:
            store = self.path / "store.sqlite"
            if not create and not store.exists():  # never create an empty store while opening an index
                raise RetrievalError(f"index at {self.path} has no store.sqlite; {self._repair_hint()}")
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                self._db = sqlite3.connect(store, check_same_thread=False)
                for statement in SCHEMA:
                    self._db.execute(statement)
                self._db.commit()
            except sqlite3.DatabaseError as exc:
                self._db = None
                raise RetrievalError(f"{store}: not a readable SQLite store ({exc}); {self._repair_hint()}") from None
        return self._db

    def _vector_rows(self) -> int:
        path = self.path / "vectors.f32"
        return path.stat().st_size // (4 * int(self.manifest()["dim"])) if path.exists() else 0

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> int | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def _set_meta(db: sqlite3.Connection, key: str, value: int) -> None:
        db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def _next_vid(self, db: sqlite3.Connection) -> int:
        """The vid (and vectors.f32 row) of the next chunk added. Vids are never reused, so a process that opened
        the index before a re-index never maps an old vector to a new text."""
        recorded = self._meta(db, "next_vid")
        if recorded is not None:
            return recorded
        return int(db.execute("SELECT COALESCE(MAX(vid) + 1, 0) FROM chunks").fetchone()[0])  # an older index

    def _bump_generation(self, db: sqlite3.Connection) -> None:
        """Inside the transaction that changes the chunks: the derived files now lag until `finalize`."""
        self._set_meta(db, "generation", (self._meta(db, "generation") or 0) + 1)

    def reconcile(self) -> list[str]:
        """Finish or undo a write phase a crash interrupted: make vectors.f32 hold exactly the rows up to next_vid."""
        repaired: list[str] = []
        with self._lock:
            db = self._conn(create=True)
            end = self._next_vid(db)
            path, row_bytes = self.path / "vectors.f32", 4 * int(self.manifest()["dim"])
            size = path.stat().st_size if path.exists() else 0
            if size > end * row_bytes:  # vectors appended, then the commit of their rows was lost
                with path.open("r+b") as fh:
                    fh.truncate(end * row_bytes)
                    fh.flush()
                    os.fsync(fh.fileno())
                repaired.append(f"vectors.f32 cut back from {size / row_bytes:g} to the {end} committed rows")
            elif size < end * row_bytes:  # a truncated vectors file: those rows are added again
                keep = size // row_bytes
                lost = int(db.execute("SELECT COUNT(*) FROM chunks WHERE vid >= ?", (keep,)).fetchone()[0])
                db.execute("DELETE FROM chunks WHERE vid >= ?", (keep,))
                self._set_meta(db, "next_vid", keep)
                self._bump_generation(db)
                db.commit()
                with path.open("r+b" if path.exists() else "wb") as fh:
                    fh.truncate(keep * row_bytes)
                repaired.append(f"store.sqlite rows {keep}..{end - 1} had no vectors: {lost} chunks removed, they "
                                "are re-added")
        return repaired

    def consistent(self) -> list[str]:
        """What lags behind the stored rows (empty when manifest, store, vectors, FAISS and BM25 agree)."""
        n = self.count()
        with self._lock:
            db = self._conn()
            end, generation = self._next_vid(db), self._meta(db, "generation") or 0
        lagging = []
        if int(self.manifest().get("count", -1)) != n:
            lagging.append(f"manifest says {self.manifest().get('count')} chunks, store.sqlite holds {n}")
        elif int(self.manifest().get("generation", 0)) != generation:
            lagging.append(f"store.sqlite changed (generation {generation}) after the dense and BM25 indexes "
                           f"were built (generation {self.manifest().get('generation', 0)})")
        if self._vector_rows() != end:
            lagging.append(f"vectors.f32 holds {self._vector_rows()} rows, store.sqlite {end}")
        if not (self.path / "dense.faiss").exists():
            lagging.append("dense.faiss is missing")
        bm25_params = self.path / "bm25" / "params.index.json"
        try:
            bm25_docs = int(json.loads(bm25_params.read_text())["num_docs"])
        except (OSError, ValueError, KeyError):
            lagging.append("bm25/ is missing or unreadable")
        else:
            if bm25_docs != n:
                lagging.append(f"bm25/ indexes {bm25_docs} chunks, store.sqlite {n}")
        return lagging

    def count(self) -> int:
        with self._lock:
            return int(self._conn().execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    # ---------------------------------------------------------------- ingestion
    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the folder's write lock for one ingest, and read everything afresh once another writer is done."""
        with index_lock(self.path, self.lock_timeout_s):
            self._manifest = None
            self._dense = self._bm25 = self._bm25_vids = None
            yield

    def prepare(self, corpus: str, corpus_hash: str, reindex: list[str] | None = None) -> list[str]:
        """Create or reopen the index for ingestion; refuse to mix embedders. `reindex`: what a repair hint prints."""
        self._manifest = None  # what is on disk now, not what this object read before
        if self.manifest_path.exists():
            self.check_embedder()
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            self._manifest = {"embedder": self.embedder.name, "dim": self.embedder.dim, "corpora": {}, "count": 0}
            self._write_manifest()
        self.manifest()["corpora"][corpus] = corpus_hash
        if reindex is not None:
            self.manifest().setdefault("reindex", {})[corpus] = reindex
        self._write_manifest()  # an index killed before its finalize still names the command that completes it
        return self.reconcile()

    def _stored_chunks(self, db: sqlite3.Connection, corpus: str, doc_id: str | None) -> dict[str, list[Chunk]]:
        """The stored chunks of one document (or, with doc_id None, of every document of the corpus) by doc id."""
        if doc_id is None:
            low, high = f"{corpus}:", f"{corpus};"  # ';' follows ':': every id that starts with "corpus:"
        else:
            low = chunk_prefix(corpus, doc_id)
            high = low[:-1] + "$"  # '$' follows '#'
        out: dict[str, list[Chunk]] = {}
        for cid, doc, title, text, source, meta in db.execute(
                "SELECT id, doc_id, title, text, source, metadata FROM chunks WHERE id >= ? AND id < ?", (low, high)):
            if doc is None or chunk_number(cid, chunk_prefix(corpus, doc)) is None or (doc_id and doc != doc_id):
                continue  # another corpus's chunk whose id shares the prefix
            out.setdefault(doc, []).append(Chunk(cid, doc, title or "", text or "", source or "", json.loads(meta or "{}")))
        return out

    def stored_doc_hashes(self, corpus: str, current: dict[str, str]) -> dict[str, str]:
        """{doc_id: hash} of what the index holds for `corpus`: the recorded hashes, and for its documents without
        one (an older index, or a crash mid-replace) the hash of their stored chunks, so stale chunks are found."""
        with self._lock:
            db = self._conn(create=True)
            recorded = dict(db.execute("SELECT doc_id, hash FROM docs WHERE corpus = ?", (corpus,)).fetchall())
            if not recorded:  # nothing recorded: hash whatever the index holds for this corpus
                return {doc: doc_hash(chunks) for doc, chunks in self._stored_chunks(db, corpus, None).items()}
            for doc in current.keys() - recorded.keys():
                stored = self._stored_chunks(db, corpus, doc).get(doc)
                if stored:
                    recorded[doc] = doc_hash(stored)
            return recorded

    def remove_docs(self, corpus: str, doc_ids: list[str]) -> int:
        """Delete these documents' chunks and recorded hashes in one transaction; returns the chunks removed. Their
        vectors stay in vectors.f32, unreferenced (vids are never reused)."""
        if not doc_ids:
            return 0
        removed = 0
        with self._lock:
            db = self._conn(create=True)
            for doc in doc_ids:
                ids = [(c.id,) for c in self._stored_chunks(db, corpus, doc).get(doc, [])]
                db.executemany("DELETE FROM chunks WHERE id = ?", ids)
                removed += len(ids)
                db.execute("DELETE FROM docs WHERE corpus = ? AND doc_id = ?", (corpus, doc))
            self._bump_generation(db)
            db.commit()
        return removed

    def record_doc_hashes(self, corpus: str, hashes: dict[str, str]) -> None:
        """After the last add: these are the documents (and content) the index holds for `corpus`."""
        with self._lock:
            db = self._conn(create=True)
            db.execute("DELETE FROM docs WHERE corpus = ?", (corpus,))
            db.executemany("INSERT INTO docs VALUES (?, ?, ?)", [(corpus, d, h) for d, h in hashes.items()])
            db.commit()

    def existing_ids(self, ids: list[str]) -> set[str]:
        found: set[str] = set()
        with self._lock:
            db = self._conn()
            for i in range(0, len(ids), 900):  # SQLite's host-parameter limit
                part = ids[i : i + 900]
                rows = db.execute(f"SELECT id FROM chunks WHERE id IN ({','.join('?' * len(part))})", part)
                found.update(r[0] for r in rows)
        return found

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk")
        if not chunks:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock:
            db = self._conn(create=True)
            start = self._next_vid(db)
            db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)", [
                (start + i, c.id, c.doc_id, c.title, c.text, c.source, json.dumps(c.metadata))
                for i, c in enumerate(chunks)])
            self._set_meta(db, "next_vid", start + len(chunks))
            self._bump_generation(db)
            path, row_bytes = self.path / "vectors.f32", vectors.shape[1] * 4
            with path.open("r+b" if path.exists() else "wb") as fh:  # vectors first: reconcile() cuts an uncommitted tail
                fh.truncate(start * row_bytes)  # no-op after reconcile(); an uncommitted tail would shift every row
                fh.seek(start * row_bytes)
                fh.write(vectors.tobytes())
                fh.flush()
                os.fsync(fh.fileno())
            db.commit()

    def _write_manifest(self) -> None:
        tmp = self.manifest_path.with_name("manifest.json.tmp")
        tmp.write_text(json.dumps(self._manifest, indent=2) + "\n")
        os.replace(tmp, self.manifest_path)

    def finalize(self) -> dict[str, Any]:
        """Rebuild the dense and BM25 indexes over everything stored; write the manifest."""
        import bm25s
        import faiss

        dim = int(self.manifest()["dim"])
        with self._lock:
            db = self._conn()
            vids = np.fromiter((r[0] for r in db.execute("SELECT vid FROM chunks ORDER BY vid")), dtype=np.int64)
            generation = self._meta(db, "generation") or 0
        n = len(vids)
        rows = self._vector_rows()
        stored = np.memmap(self.path / "vectors.f32", dtype=np.float32, mode="r", shape=(rows, dim)) if rows else \
            np.zeros((0, dim), dtype=np.float32)
        # only the live rows (replaced chunks leave unreferenced rows behind)
        vectors = np.ascontiguousarray(stored[:n] if n and vids[-1] == n - 1 else stored[vids])
        del stored
        start = time.perf_counter()
        dense, kind = build_dense_index(vectors, hnsw_threshold=self.hnsw_threshold, hnsw_m=self.hnsw_m,
                                        ef_construction=self.ef_construction, ef_search=self.ef_search, ids=vids)
        faiss.write_index(dense, str(self.path / "dense.faiss.tmp"))
        os.replace(self.path / "dense.faiss.tmp", self.path / "dense.faiss")
        dense_seconds = time.perf_counter() - start

        start = time.perf_counter()
        texts = [f"{t}\n{x}" for t, x in self._conn().execute("SELECT title, text FROM chunks ORDER BY vid")]
        bm25 = bm25s.BM25(backend=self.bm25_backend)
        bm25.index(bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer(), show_progress=False),
                   show_progress=False)
        fresh, old = self.path / "bm25.tmp", self.path / "bm25.old"
        shutil.rmtree(fresh, ignore_errors=True)
        bm25.save(str(fresh))
        np.save(fresh / "vids.npy", vids)  # renamed together with the BM25 index it maps
        if (self.path / "bm25").exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.path / "bm25", old)
        os.replace(fresh, self.path / "bm25")
        shutil.rmtree(old, ignore_errors=True)
        bm25_seconds = time.perf_counter() - start

        self._manifest.update({"count": n, "generation": generation, "dense_index": kind,
                               "updated": time.strftime("%Y-%m-%dT%H:%M:%S")})
        self._write_manifest()
        self._dense, self._bm25, self._bm25_vids = dense, bm25, vids
        return {"count": n, "dense_index": kind, "dense_build_s": dense_seconds, "bm25_build_s": bm25_seconds}

    # ---------------------------------------------------------------- search
    def _stemmer(self):
        if not self.stemmer_name:
            return None
        import Stemmer

        return Stemmer.Stemmer(self.stemmer_name)

    def _load(self) -> None:
        if self._dense is not None and self._bm25 is not None:
            return
        import bm25s  # imported on first use: seconds a run without retrieval need not pay
        import faiss

        self.check_searchable()
        with self._lock:
            try:
                if self._dense is None:
                    self._dense = faiss.read_index(str(self.path / "dense.faiss"))
                    inner = faiss.downcast_index(self._dense.index) if isinstance(self._dense, faiss.IndexIDMap) \
                        else self._dense
                    if hasattr(inner, "hnsw"):
                        inner.hnsw.efSearch = self.ef_search
                if self._bm25 is None:
                    self._bm25 = bm25s.BM25.load(str(self.path / "bm25"), mmap=True)
                    self._bm25.backend = self.bm25_backend
                    vids = self.path / "bm25" / "vids.npy"
                    self._bm25_vids = np.load(vids) if vids.exists() else None
            except Exception as exc:  # a corrupted file: FAISS raises RuntimeError, bm25s OSError/ValueError
                self._dense = self._bm25 = None
                raise RetrievalError(f"index at {self.path} cannot be opened ({type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0][:200]}); {self._repair_hint()}") from None
            if self._dense.ntotal != int(self.manifest()["count"]):
                raise RetrievalError(f"index at {self.path}: dense.faiss holds {self._dense.ntotal} vectors, the manifest "
                                     f"{self.manifest()['count']}; {self._repair_hint()}")

    def _dense_search(self, qvecs: np.ndarray, k: int) -> list[dict[int, float]]:
        scores, ids = self._dense.search(qvecs, k)
        return [{int(i): float(s) for i, s in zip(row_ids, row_scores, strict=True) if i >= 0}
                for row_ids, row_scores in zip(ids, scores, strict=True)]

    def _bm25_search(self, queries: list[str], k: int) -> list[dict[int, float]]:
        import bm25s

        n = int(self.manifest()["count"])
        tokens = bm25s.tokenize(queries, stopwords="en", stemmer=self._stemmer(), show_progress=False,
                                return_ids=False)
        out: list[dict[int, float]] = [{} for _ in queries]
        # a query of stopwords only has no token left (bm25s rejects a batch whose first query is empty): no match
        keep = [i for i, t in enumerate(tokens) if t]
        if not keep:
            return out
        docs, scores = self._bm25.retrieve([tokens[i] for i in keep], k=min(k, n), show_progress=False, n_threads=1,
                                           backend_selection=self.bm25_backend)
        vids = self._bm25_vids
        for i, row_d, row_s in zip(keep, docs, scores, strict=True):
            out[i] = {int(vids[d] if vids is not None else d): float(s)
                      for d, s in zip(row_d, row_s, strict=True) if s > 0}
        return out

    def _rows(self, vids: list[int]) -> dict[int, tuple]:
        with self._lock:
            rows = self._conn().execute(
                f"SELECT vid, id, doc_id, title, text, source, metadata FROM chunks WHERE vid IN ({','.join('?' * len(vids))})",
                vids).fetchall()
        return {r[0]: r for r in rows}

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        if not queries:
            return []
        self._load()
        depth = max(k, self.candidates)
        none: list[dict[int, float]] = [{} for _ in queries]
        dense = self._dense_search(self.embedder.encode_queries(queries), depth) if self.mode != "bm25" else none
        sparse = self._bm25_search(queries, depth) if self.mode != "dense" else none
        results = []
        for d, s in zip(dense, sparse, strict=True):
            if self.mode == "dense":
                fused = d
            elif self.mode == "bm25":
                fused = s
            elif self.fusion == "rrf":
                fused = rrf_fuse([sorted(d, key=lambda v: -d[v]), sorted(s, key=lambda v: -s[v])], self.rrf_k)
            else:
                fused = alpha_fuse(d, s, self.alpha)
            ranked = sorted(fused, key=lambda v: -fused[v])
            rows = self._rows(ranked[:k]) if ranked and k > 0 else {}
            if len(rows) < min(k, len(ranked)):
                # a process that opened the index before a re-index ranks chunks it removed: skipped, never served
                rows = self._rows(ranked)
            top = [v for v in ranked if v in rows][:k]
            results.append([
                Passage(id=rows[v][1], text=rows[v][4], title=rows[v][3] or "", source=rows[v][5] or "",
                        score=float(fused[v]),
                        metadata={**json.loads(rows[v][6] or "{}"), "doc_id": rows[v][2],
                                  "dense_score": d.get(v), "bm25_score": s.get(v)})
                for v in top])
        return results

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_batch([query], k)[0]
