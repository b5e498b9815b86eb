"""The DSPy-facing retrieval module: first-stage search (top k) then optional cross-encoder rerank (top rerank_k)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import dspy

from retrieval.ingest import SearchBackend
from retrieval.passage import Passage
from retrieval.rerank import CrossEncoderReranker

# Any text works (a query of stopwords or of words outside the index too); it only has to run every step once.
WARM_UP_QUERY = "warm-up query: treatment of a patient"


class Retriever(dspy.Module):
    """`search(query, k) -> list[Passage]`; as a DSPy module, `forward(query)` returns `Prediction(passages=...)`."""

    def __init__(self, backend: SearchBackend, reranker: CrossEncoderReranker | None = None, k: int = 50,
                 rerank_k: int = 20) -> None:
        super().__init__()
        self.backend = backend
        self.reranker = reranker
        self.k = k
        self.rerank_k = rerank_k
        self.last_timing: dict[str, float] = {}   # the latest search: search_s (first stage), rerank_s
        self.load_timing: dict[str, float] = {}   # warm_up(): embedder_s, index_s, reranker_s

    def warm_up(self, query: str = WARM_UP_QUERY) -> dict[str, float]:
        """Do the one-off work of a first query now (load the embedder, open the index, compile bm25s' kernels, load
        the reranker), so `last_timing` measures queries only. Returns the seconds per part (kept in `load_timing`)."""
        timing: dict[str, float] = {}
        embedder = getattr(self.backend, "embedder", None)
        if embedder is not None:  # its own line: model loading is often the larger part
            start = time.perf_counter()
            embedder.encode_queries([query])
            timing["embedder_s"] = time.perf_counter() - start
        start = time.perf_counter()
        first = self.backend.search_batch([query], self.k)[0]
        timing["index_s"] = time.perf_counter() - start
        if self.reranker is not None:
            start = time.perf_counter()
            # one pair loads the model and runs it once; a full rerank of k passages would be query-sized work
            self.reranker.rerank(query, first[:1] or [Passage(id="warm-up", text=query)], 1)
            timing["reranker_s"] = time.perf_counter() - start
        self.load_timing = timing
        return timing

    def search(self, query: str, k: int | None = None) -> list[Passage]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: list[str], k: int | None = None) -> list[list[Passage]]:
        start = time.perf_counter()
        first = self.backend.search_batch(queries, self.k)
        searched = time.perf_counter()
        final_k = k or self.rerank_k
        if self.reranker is not None:
            out = [self.reranker.rerank(q, ps, final_k) for q, ps in zip(queries, first, strict=True)]
        else:
            out = [ps[:final_k] for ps in first]
        self.last_timing = {"search_s": searched - start, "rerank_s": time.perf_counter() - searched}
        return out

    def forward(self, query: str, k: int | None = None) -> dspy.Prediction:
        return dspy.Prediction(passages=self.search(query, k))

    def check(self) -> None:
        """Fail now, with one line, when the index is missing, was built with another embedder, or cannot answer a
        search: an agent run would otherwise read "search failed" on every search of every note."""
        getattr(self.backend, "check_searchable", self.backend.check_embedder)()

    def as_tool(self, name: str = "search", max_chars: int = 600, max_passages: int | None = None) -> dspy.Tool:
        """A `dspy.Tool` for agents (ReAct): the top `max_passages` passages as numbered text, a `SearchResult`."""

        def search(query: str) -> str:
            """Search the medical corpus and return the most relevant passages."""
            passages = self.search(query)[:max_passages]
            return SearchResult(format_passages(passages, max_chars), passages)

        return dspy.Tool(search, name=name)


class SearchResult(str):
    """The formatted passages an agent reads, with the passages themselves in `.passages`: a str, so every agent reads
    plain text, and the passages travel with their result (no "last search" state shared between threads)."""

    passages: tuple[Passage, ...]

    def __new__(cls, text: str, passages: Sequence[Passage] = ()) -> SearchResult:  # the default lets pickle copy it
        result = super().__new__(cls, text)
        result.passages = tuple(passages)
        return result


def format_passages(passages: list[Passage], max_chars: int) -> str:
    """Numbered passages as an agent reads them: `[i] (source) title` then the first `max_chars` of the text."""
    return "\n\n".join(f"[{i}] ({p.source}) {p.title}\n{p.text[:max_chars]}" for i, p in enumerate(passages, 1))
