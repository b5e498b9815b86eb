"""Stage 4 without an LM: link each answer sentence to the note sentences most similar to it. Relevance mixes cosine
and relative BM25 by `lexical_weight`; a link needs relevance >= `threshold` and within `margin` of the best, the best
`min_links` are linked regardless, at most `max_citations`. Headers are never linked.
"""

from __future__ import annotations

import dspy

from programs.archehr.shared.lexical import bm25_scores
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import AnswerSentence, NoteSentence


class SimilarityAligner(dspy.Module):
    def __init__(self, embedder: Embedder, threshold: float, max_citations: int, min_links: int = 0,
                 margin: float | None = None, lexical_weight: float = 0.0) -> None:
        super().__init__()
        self.embedder = embedder
        self.threshold = threshold
        self.max_citations = max_citations
        self.min_links, self.margin, self.lexical_weight = min_links, margin, lexical_weight

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        candidates = [s for s in sentences if not is_header(s.text)]
        if not answer_sentences or not candidates:
            return dspy.Prediction(alignment=[{"answer_id": a.id, "evidence_id": []} for a in answer_sentences],
                                   dropped_ids=0, fallback=None)
        texts = [s.text for s in candidates]
        sims = cosine_matrix(self.embedder, [a.text for a in answer_sentences], texts)
        alignment = []
        for answer, row in zip(answer_sentences, sims, strict=True):
            relevance = [float(x) for x in row]
            if self.lexical_weight:
                lexical = bm25_scores(answer.text, texts)
                best_lex = max(lexical, default=0.0)
                relevance = [(1 - self.lexical_weight) * r + self.lexical_weight * (x / best_lex if best_lex else 0.0)
                             for r, x in zip(relevance, lexical, strict=True)]
            ranked = sorted(range(len(candidates)), key=lambda j: -relevance[j])[: self.max_citations]
            best = relevance[ranked[0]]
            links = [candidates[j].id for n, j in enumerate(ranked)
                     if n < self.min_links or (relevance[j] >= self.threshold
                                               and (self.margin is None or relevance[j] >= best - self.margin))]
            alignment.append({"answer_id": answer.id, "evidence_id": links})
        return dspy.Prediction(alignment=alignment, dropped_ids=0, fallback=None)
