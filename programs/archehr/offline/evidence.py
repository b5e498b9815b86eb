"""Stage 2 without an LM: cosine similarity of question and note sentences mapped to the 1-5 scale.

Cut points map a similarity to Likert scores (>= cuts[3] -> 5, >= cuts[2] -> 4, >= cuts[1] -> 3, >= cuts[0] -> 2,
else 1), so the seed's strict (>= 4) / lenient (>= 3) / first-3 selection applies unchanged. With `relative`
(the default) a sentence's similarity is divided by the note's best one first: MiniLM cosines vary a lot between
notes, their ranking much less. Section headers (a short sentence ending in ':') score 1: never evidence.
"""

from __future__ import annotations

import dspy

from programs.archehr.evidence import select_evidence
from programs.archehr.offline.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

DEFAULT_CUTS = (0.5, 0.7, 0.8, 0.95)


def is_header(text: str) -> bool:
    return text.rstrip().endswith(":") and len(text.split()) <= 6


def to_likert(similarity: float, cuts: tuple[float, ...]) -> int:
    return 1 + sum(similarity >= c for c in sorted(cuts))


class EmbeddingEvidenceScorer(dspy.Module):
    def __init__(self, embedder: Embedder, strict_threshold: int, lenient_threshold: int, fallback_count: int,
                 cuts: tuple[float, ...] = DEFAULT_CUTS, relative: bool = True) -> None:
        super().__init__()
        self.embedder = embedder
        self.relative = relative
        self.thresholds = (strict_threshold, lenient_threshold, fallback_count)
        self.cuts = tuple(cuts)

    def forward(self, clinician_question: str, sentences: list[NoteSentence]) -> dspy.Prediction:
        sims = cosine_matrix(self.embedder, [clinician_question], [s.text for s in sentences])[0]
        best = max((float(x) for s, x in zip(sentences, sims, strict=True) if not is_header(s.text)), default=1.0)
        scale = best if self.relative and best > 0 else 1.0
        scores = [1 if is_header(s.text) else to_likert(float(x) / scale, self.cuts)
                  for s, x in zip(sentences, sims, strict=True)]
        ids, selection = select_evidence(sentences, scores, *self.thresholds)
        return dspy.Prediction(evidence_ids=ids, scores=dict(zip([s.id for s in sentences], scores, strict=True)),
                               similarities={s.id: round(float(x), 4) for s, x in zip(sentences, sims, strict=True)},
                               selection=selection, fallback=None)
