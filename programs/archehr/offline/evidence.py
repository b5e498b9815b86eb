"""Stage 2 without an LM: cosine similarity of question and note sentences mapped to the 1-5 scale.

Cut points map a similarity to Likert scores (>= cuts[3] -> 5, >= cuts[2] -> 4, >= cuts[1] -> 3, >= cuts[0] -> 2,
else 1), so the seed's strict (>= 4) / lenient (>= 3) / first-3 selection applies unchanged. With `relative`
(the default) a sentence's similarity is divided by the note's best one first: MiniLM cosines vary a lot between
notes, their ranking much less. Section headers (a short sentence ending in ':') score 1: never evidence.
"""

from __future__ import annotations

import math

import dspy

from programs.archehr.evidence import select_evidence
from programs.archehr.offline.lexical import bm25_scores
from programs.archehr.offline.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

DEFAULT_CUTS = (0.5, 0.7, 0.8, 0.95)


def is_header(text: str) -> bool:
    return text.rstrip().endswith(":") and len(text.split()) <= 6


def to_likert(similarity: float, cuts: tuple[float, ...]) -> int:
    return 1 + sum(similarity >= c for c in sorted(cuts))


class EmbeddingEvidenceScorer(dspy.Module):
    """Relevance = (1 - lexical_weight) * dense cosine + lexical_weight * BM25, each relative to the note's best
    (with `relative`), mapped to 1-5 by `cuts`. Selection: the seed's strict/lenient/first-n rule on those scores,
    or recall-first with `top_share` (the top share of the note's non-header sentences, at least `min_selected`)."""

    preferred_anchor = "both"  # question + narrative: chosen by cross-validation (benchmarks/archehr_offline_cv.py)

    def __init__(self, embedder: Embedder, strict_threshold: int, lenient_threshold: int, fallback_count: int,
                 cuts: tuple[float, ...] = DEFAULT_CUTS, relative: bool = True, lexical_weight: float = 0.0,
                 top_share: float | None = None, min_selected: int = 1) -> None:
        super().__init__()
        if not 0.0 <= lexical_weight <= 1.0 or (top_share is not None and not 0.0 < top_share <= 1.0):
            from common.errors import ConfigError

            raise ConfigError("program.offline: lexical_weight must be in [0, 1] and top_share in (0, 1] or null")
        self.embedder = embedder
        self.relative = relative
        self.thresholds = (strict_threshold, lenient_threshold, fallback_count)
        self.cuts = tuple(cuts)
        self.lexical_weight, self.top_share, self.min_selected = lexical_weight, top_share, min_selected

    def relevance(self, anchor: str, sentences: list[NoteSentence]) -> tuple[list[float], list[float]]:
        """(fused relevance, raw cosine) per sentence; headers get 0."""
        texts = [s.text for s in sentences]
        sims = [float(x) for x in cosine_matrix(self.embedder, [anchor], texts)[0]]
        headers = [is_header(t) for t in texts]

        def scaled(values: list[float]) -> list[float]:
            best = max((v for v, h in zip(values, headers, strict=True) if not h), default=0.0)
            return [v / best if self.relative and best > 0 else v for v in values]

        fused = scaled(sims)
        if self.lexical_weight:
            lexical = bm25_scores(anchor, texts)
            best_lex = max(lexical, default=0.0)
            lexical = [v / best_lex if best_lex > 0 else 0.0 for v in lexical]
            fused = [(1 - self.lexical_weight) * d + self.lexical_weight * x for d, x in zip(fused, lexical, strict=True)]
        return [0.0 if h else f for f, h in zip(fused, headers, strict=True)], sims

    def forward(self, clinician_question: str, sentences: list[NoteSentence]) -> dspy.Prediction:
        fused, sims = self.relevance(clinician_question, sentences)
        scores = [1 if is_header(s.text) else to_likert(f, self.cuts) for s, f in zip(sentences, fused, strict=True)]
        if self.top_share is not None:
            candidates = [i for i, s in enumerate(sentences) if not is_header(s.text)]
            k = max(self.min_selected, math.ceil(self.top_share * len(candidates)))
            top = sorted(sorted(candidates, key=lambda i: -fused[i])[:k])
            ids, selection = [sentences[i].id for i in top], "top_share"
        else:
            ids, selection = select_evidence(sentences, scores, *self.thresholds)
        return dspy.Prediction(evidence_ids=ids, scores=dict(zip([s.id for s in sentences], scores, strict=True)),
                               similarities={s.id: round(x, 4) for s, x in zip(sentences, sims, strict=True)},
                               relevance={s.id: round(f, 4) for s, f in zip(sentences, fused, strict=True)},
                               selection=selection, fallback=None)
