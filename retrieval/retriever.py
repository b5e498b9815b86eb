"""The DSPy-facing retrieval module: first-stage search (top k) then optional cross-encoder rerank (top rerank_k)."""

from __future__ import annotations

import time

import dspy

from retrieval.ingest import SearchBackend
from retrieval.passage import Passage
from retrieval.rerank import CrossEncoderReranker


class Retriever(dspy.Module):
    """`search(query, k) -> list[Passage]`; as a DSPy module, `forward(query)` returns `Prediction(passages=...)`."""

    def __init__(self, backend: SearchBackend, reranker: CrossEncoderReranker | None = None, k: int = 50,
                 rerank_k: int = 20) -> None:
        super().__init__()
        self.backend = backend
        self.reranker = reranker
        self.k = k
        self.rerank_k = rerank_k
        self.last_timing: dict[str, float] = {}

    def search(self, query: str, k: int | None = None) -> list[Passage]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: list[str], k: int | None = None) -> list[list[Passage]]:
        start = time.perf_counter()
        first = self.backend.search_batch(queries, self.k)
        searched = time.perf_counter()
        if self.reranker is not None:
            final_k = k or self.rerank_k
            out = [self.reranker.rerank(q, ps, final_k) for q, ps in zip(queries, first, strict=True)]
        else:
            final_k = k or self.rerank_k
            out = [ps[:final_k] for ps in first]
        self.last_timing = {"search_s": searched - start, "rerank_s": time.perf_counter() - searched}
        return out

    def forward(self, query: str, k: int | None = None) -> dspy.Prediction:
        return dspy.Prediction(passages=self.search(query, k))

    def check(self) -> None:
        """Fail now, with one line, when the index is missing or was built with another embedder."""
        self.backend.check_embedder()

    def as_tool(self, name: str = "search", max_chars: int = 600, max_passages: int | None = None) -> dspy.Tool:
        """A `dspy.Tool` for agents (ReAct): the top `max_passages` passages as numbered text."""

        def search(query: str) -> str:
            """Search the medical corpus and return the most relevant passages."""
            return format_passages(self.search(query)[:max_passages], max_chars)

        return dspy.Tool(search, name=name)


def format_passages(passages: list[Passage], max_chars: int) -> str:
    """Numbered passages as an agent reads them: `[i] (source) title` then the first `max_chars` of the text."""
    return "\n\n".join(f"[{i}] ({p.source}) {p.title}\n{p.text[:max_chars]}" for i, p in enumerate(passages, 1))
