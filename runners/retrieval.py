"""`task=index` (build or extend an index from `corpus=...`) and `task=search` (query it)."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from retrieval.corpus import CorpusSpec
from retrieval.embed import Embedder
from retrieval.ingest import ingest
from retrieval.passage import RetrievalError
from retrieval.retriever import Retriever
from runners.common import output_dir, write_json


def build_embedder(cfg: DictConfig) -> Embedder:
    return instantiate(cfg.embedder)


def build_backend(cfg: DictConfig, embedder: Embedder) -> Any:
    return instantiate(cfg.retriever.backend, embedder=embedder)


def build_retriever(cfg: DictConfig) -> Retriever:
    embedder = build_embedder(cfg)
    reranker = instantiate(cfg.reranker) if cfg.reranker.get("_target_") else None
    return Retriever(build_backend(cfg, embedder), reranker, k=cfg.retriever.k, rerank_k=cfg.retriever.rerank_k)


def index(cfg: DictConfig) -> None:
    spec = CorpusSpec(**OmegaConf.to_container(cfg.corpus, resolve=True))
    embedder = build_embedder(cfg)
    backend = build_backend(cfg, embedder)
    report = ingest(spec, backend, embedder, progress=cfg.progress)
    write_json(output_dir() / "index_report.json", asdict(report))
    print(f"index {spec.name}: {report.chunks} chunks, {report.added} added, {report.skipped} already indexed, "
          f"{report.failed} failed, {report.seconds:.1f} s" + (f"; {report.finalize}" if report.finalize else "")
          + (f"; {report.duplicates_skipped} duplicate doc ids skipped" if report.duplicates_skipped else ""))
    for note in report.repaired or []:
        print(f"repaired: {note}")


def search(cfg: DictConfig) -> None:
    if not cfg.get("query"):
        raise RetrievalError("task=search needs query='...'")
    start = time.perf_counter()
    retriever = build_retriever(cfg)
    # Start-up (model loading, index files, bm25s' JIT compile or numba-cache load) happens once per process: a
    # throwaway query pays it here so that the query time below is what each further query costs.
    parts = retriever.warm_up()
    load_s = time.perf_counter() - start
    passages = retriever.search(cfg.query)
    for i, p in enumerate(passages, 1):
        print(f"{i:2d}. {p.score:.4f} [{p.source}] {p.id} | {p.title}\n    {p.text[:160]!r}")
    timing = {"load_s": load_s, **parts, "query_s": sum(retriever.last_timing.values()), **retriever.last_timing}
    write_json(output_dir() / "timing.json", timing)
    print(f"timing: {format_timing(timing)}")


def format_timing(t: dict[str, float]) -> str:
    """`load 9.3 s (embedder 4.2 s, index 5.1 s; with a warm-up query), query 0.02 s (search 0.02 s, rerank 0.00 s)`."""
    load = ", ".join(f"{name} {t[f'{name}_s']:.1f} s" for name in ("embedder", "index", "reranker") if f"{name}_s" in t)
    return (f"load {t['load_s']:.1f} s ({load}; with a warm-up query), "
            f"query {t['query_s']:.2f} s (search {t['search_s']:.2f} s, rerank {t['rerank_s']:.2f} s)")
