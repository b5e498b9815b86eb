"""Stage 2 without an LM: cosine similarity of question and note sentences mapped to 1-5 by cut points. With
`relative` a similarity is divided by the note's best first: MiniLM cosines vary between notes, their ranking much
less. Section headers score 1."""

from __future__ import annotations

import math

import dspy

from common.errors import number_in
from programs.archehr.evidence.lm import select_by_likert
from programs.archehr.shared.lexical import bm25_scores
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.similarity import cosine_matrix
from programs.archehr.stages import anchor_text, check_anchor
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

DEFAULT_CUTS = (0.5, 0.7, 0.8, 0.95)


def to_likert(similarity: float, cuts: tuple[float, ...]) -> int:
    return 1 + sum(similarity >= c for c in sorted(cuts))


class EmbeddingEvidenceScorer(dspy.Module):
    """Relevance = (1 - lexical_weight) * dense cosine + lexical_weight * BM25, each relative to the note's best
    (with `relative`), mapped to 1-5 by `cuts` (the scores shown in predictions and the report). Selection is
    recall-first: the top `top_share` of the note's non-header sentences, at least `min_selected`."""

    def __init__(self, embedder: Embedder, anchor: str = "both", top_share: float = 0.6, min_selected: int = 1,
                 lexical_weight: float = 0.0, relative: bool = True, cuts: tuple[float, ...] = DEFAULT_CUTS) -> None:
        super().__init__()
        number_in("program.evidence.top_share", top_share, 0, 1, low_open=True)
        number_in("program.evidence.min_selected", min_selected, 1, integer=True)
        number_in("program.evidence.lexical_weight", lexical_weight, 0, 1)
        self.top_share, self.min_selected = top_share, min_selected
        self.embedder = embedder
        self.anchor = check_anchor(anchor)  # both (question + narrative): chosen by cross-validation
        self.relative = relative
        self.cuts = tuple(cuts)
        self.lexical_weight = lexical_weight

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

    def select(self, sentences: list[NoteSentence], fused: list[float], scores: list[int]) -> tuple[list[str], str]:
        candidates = [i for i, s in enumerate(sentences) if not is_header(s.text)]
        k = max(self.min_selected, math.ceil(self.top_share * len(candidates)))
        top = sorted(sorted(candidates, key=lambda i: -fused[i])[:k])
        return [sentences[i].id for i in top], "top_share"

    def forward(self, clinician_question: str, patient_narrative: str,
                sentences: list[NoteSentence]) -> dspy.Prediction:
        fused, sims = self.relevance(anchor_text(self.anchor, clinician_question, patient_narrative), sentences)
        scores = [1 if is_header(s.text) else to_likert(f, self.cuts) for s, f in zip(sentences, fused, strict=True)]
        ids, selection = self.select(sentences, fused, scores)
        return dspy.Prediction(evidence_ids=ids, scores=dict(zip([s.id for s in sentences], scores, strict=True)),
                               similarities={s.id: round(x, 4) for s, x in zip(sentences, sims, strict=True)},
                               relevance={s.id: round(f, 4) for s, f in zip(sentences, fused, strict=True)},
                               selection=selection, fallback=None)


class EmbeddingLikertEvidenceScorer(EmbeddingEvidenceScorer):
    """The same relevance and Likert scores, selected by the seed's rule: score >= strict, else >= lenient, else
    the first `fallback_count` sentences."""

    def __init__(self, embedder: Embedder, anchor: str = "both", strict_threshold: int = 4, lenient_threshold: int = 3,
                 fallback_count: int = 3, lexical_weight: float = 0.0, relative: bool = True,
                 cuts: tuple[float, ...] = DEFAULT_CUTS) -> None:
        super().__init__(embedder, anchor, lexical_weight=lexical_weight, relative=relative, cuts=cuts)
        self.thresholds = (strict_threshold, lenient_threshold, fallback_count)

    def select(self, sentences: list[NoteSentence], fused: list[float], scores: list[int]) -> tuple[list[str], str]:
        return select_by_likert(sentences, scores, *self.thresholds)
