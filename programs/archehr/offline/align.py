"""Stage 4 without an LM: link each answer sentence to the note sentences it is most similar to (many-to-many).

Conservative by default: a link needs cosine >= `threshold`, and at most `max_citations` links per answer sentence.
"""

from __future__ import annotations

import dspy

from programs.archehr.offline.evidence import is_header
from programs.archehr.offline.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import AnswerSentence, NoteSentence


class SimilarityAligner(dspy.Module):
    def __init__(self, embedder: Embedder, threshold: float, max_citations: int) -> None:
        super().__init__()
        self.embedder = embedder
        self.threshold = threshold
        self.max_citations = max_citations

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        if not answer_sentences:
            return dspy.Prediction(alignment=[], dropped_ids=0, fallback=None)
        candidates = [s for s in sentences if not is_header(s.text)]
        sims = cosine_matrix(self.embedder, [a.text for a in answer_sentences], [s.text for s in candidates])
        alignment = []
        for answer, row in zip(answer_sentences, sims, strict=True):
            ranked = sorted(range(len(candidates)), key=lambda j: -row[j])
            links = [candidates[j].id for j in ranked[: self.max_citations] if row[j] >= self.threshold]
            alignment.append({"answer_id": answer.id, "evidence_id": links})
        return dspy.Prediction(alignment=alignment, dropped_ids=0, fallback=None)
