"""Stage 4: many-to-many alignment of answer sentences to the note sentences that directly support them."""

from __future__ import annotations

import dspy

from common.failures import RECOVERABLE, StageOutputError, describe
from programs.archehr.text import numbered
from signatures.archehr import AlignAnswer
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import AnswerSentence, NoteSentence


class AnswerAligner(dspy.Module):
    uses_lm = True

    def __init__(self, max_citations: int, tokens_per_citation: int | None = 6) -> None:
        super().__init__()
        self.max_citations = max_citations
        self.tokens_per_citation = tokens_per_citation  # reply bound per answer sentence and citation
        self.align = dspy.Predict(AlignAnswer)

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        valid = [s.id for s in sentences]
        n = len(answer_sentences)
        if n == 0:
            return dspy.Prediction(alignment=[], dropped_ids=0, fallback=None)
        inner = {"type": "array", "items": {"type": "string", "enum": valid}, "maxItems": self.max_citations}
        signature = with_output_schema(
            self.align.signature, "citations",
            {"type": "array", "items": inner, "minItems": n, "maxItems": n},
        )
        try:
            out = self.align(
                answer_sentences=numbered((a.id, a.text) for a in answer_sentences),
                note_sentences=numbered((s.id, s.text) for s in sentences),
                signature=signature,
                config=reply_bound(self.tokens_per_citation
                                   and 32 + n * (4 + self.tokens_per_citation * self.max_citations)),
            )
            citations = [[str(c).strip().strip("[]") for c in row] for row in out.citations]
            if len(citations) != n:
                raise StageOutputError(f"{len(citations)} citation lists for {n} answer sentences")
        except RECOVERABLE as exc:
            # Conservative: an unparsable alignment claims no support rather than guessing links.
            empty = [{"answer_id": a.id, "evidence_id": []} for a in answer_sentences]
            return dspy.Prediction(alignment=empty, dropped_ids=0, fallback=describe(exc))
        valid_set = set(valid)
        dropped = 0
        alignment = []
        for answer, row in zip(answer_sentences, citations, strict=True):
            kept: list[str] = []
            for cid in row:
                if cid not in valid_set:
                    dropped += 1  # unknown ids are dropped and counted, never submitted
                elif cid not in kept:
                    kept.append(cid)
            alignment.append({"answer_id": answer.id, "evidence_id": kept})
        return dspy.Prediction(alignment=alignment, dropped_ids=dropped, fallback=None)
