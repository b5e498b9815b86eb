"""Build the configured retrieval stack (embedder, backend, reranker) from a composed config (library code: used by
task=index/search and by programs whose agents search, e.g. MEDIQA-CORR's)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from retrieval.embed import Embedder
from retrieval.retriever import Retriever


def build_embedder(cfg: DictConfig) -> Embedder:
    return instantiate(cfg.embedder)


def build_backend(cfg: DictConfig, embedder: Embedder) -> Any:
    return instantiate(cfg.retriever.backend, embedder=embedder)


def build_retriever(cfg: DictConfig) -> Retriever:
    embedder = build_embedder(cfg)
    reranker = instantiate(cfg.reranker) if cfg.reranker.get("_target_") else None
    return Retriever(build_backend(cfg, embedder), reranker, k=cfg.retriever.k, rerank_k=cfg.retriever.rerank_k)
