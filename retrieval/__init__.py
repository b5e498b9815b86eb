"""Retrieval: corpus ingestion, an embedded hybrid index (FAISS + BM25 + SQLite), Weaviate, cross-encoder rerank."""

from retrieval.passage import Passage, RetrievalError

__all__ = ["Passage", "RetrievalError"]
