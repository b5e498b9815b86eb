"""`task=index` (build or extend an index from `corpus=...`) and `task=search` (query it)."""

from __future__ import annotations

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
    retriever = build_retriever(cfg)
    passages = retriever.search(cfg.query)
    for i, p in enumerate(passages, 1):
        print(f"{i:2d}. {p.score:.4f} [{p.source}] {p.id} | {p.title}\n    {p.text[:160]!r}")
    print(f"timing: {retriever.last_timing}")
