"""Stage 4: many-to-many alignment of answer sentences to the note sentences that directly support them."""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError, number_in
from common.failures import RECOVERABLE, StageOutputError, failure_reason
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.similarity import cosine_matrix
from programs.archehr.text import numbered
from signatures.archehr import AlignAnswer, CiteSupport
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import AnswerSentence, NoteSentence

FORMS = ("lists", "per_sentence")
CITE_BY = ("id", "id_both_ends")


def all_empty(alignment: list[dict], minimum: int = 2) -> bool:
    """An alignment of at least `minimum` answer sentences that cites nothing for any of them."""
    return len(alignment) >= minimum and not any(a["evidence_id"] for a in alignment)


class LMAligner(dspy.Module):
    """Links answer sentences to note sentences. `form`: `lists` (the seed's: one call, a list of ids per answer
    sentence) or `per_sentence` (one call per answer sentence). `min_citations` 0 lets the model say "unsupported",
    1 asks for every sentence's closest support. `cite_by=id_both_ends` (per_sentence) writes `[id] text [id]`: a 1.5B
    model citing by number took the next line's id. `candidates` (per_sentence) limits a reply to the k note sentences
    most similar to the answer sentence. No citation for any of 2 or more answer sentences is a `degenerate` output."""

    uses_lm = True

    def __init__(self, max_citations: int, tokens_per_citation: int | None = 6, form: str = "lists",
                 min_citations: int = 0, cite_by: str = "id", candidates: int | None = None,
                 embedder: Any = None) -> None:
        super().__init__()
        if form not in FORMS:
            raise ConfigError(f"program.alignment.form must be one of {', '.join(FORMS)}, not {str(form)[:40]!r}")
        number_in("program.alignment.min_citations", min_citations, 0, 1, integer=True)
        if cite_by not in CITE_BY:
            raise ConfigError(f"program.alignment.cite_by must be one of {', '.join(CITE_BY)}, not {str(cite_by)[:40]!r}")
        number_in("program.alignment.candidates", candidates, 1, integer=True, null=True)
        if candidates is not None and form != "per_sentence":
            raise ConfigError("program.alignment.candidates needs program.alignment.form=per_sentence")
        if cite_by == "id_both_ends" and form != "per_sentence":
            raise ConfigError("program.alignment.cite_by=id_both_ends needs program.alignment.form=per_sentence")
        self.cite_by, self.candidates, self.embedder = cite_by, candidates, embedder
        self.max_citations = max_citations
        self.tokens_per_citation = tokens_per_citation  # reply bound per answer sentence and citation
        self.form, self.min_citations = form, min_citations
        self.align = dspy.Predict(AlignAnswer if form == "lists" else CiteSupport)

    def _bound(self, n: int) -> dict[str, int]:
        return reply_bound(self.tokens_per_citation and 32 + n * (4 + self.tokens_per_citation * self.max_citations))

    def _citations(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> list[list[str]]:
        inner = {"type": "array", "items": {"type": "string", "enum": [s.id for s in sentences]},
                 "minItems": self.min_citations, "maxItems": self.max_citations}
        notes = numbered((s.id, s.text) for s in sentences)
        if self.cite_by == "id_both_ends":  # the id after the text too: a copied id is the one its sentence ends on
            notes = "\n".join(f"[{s.id}] {s.text} [{s.id}]" for s in sentences)
        n = len(answer_sentences)
        if self.form == "per_sentence":
            signature = self.align.signature
            allowed = self._allowed(answer_sentences, sentences)
            rows = []
            for answer, ids in zip(answer_sentences, allowed, strict=True):
                schema = inner if ids is None else {**inner, "items": {"type": "string", "enum": ids}}
                out = self.align(answer_sentence=answer.text, note_sentences=notes,
                                 signature=with_output_schema(signature, "citations", schema),
                                 config=self._bound(1))
                rows.append(list(out.citations))
        else:
            out = self.align(
                answer_sentences=numbered((a.id, a.text) for a in answer_sentences), note_sentences=notes,
                signature=with_output_schema(self.align.signature, "citations",
                                             {"type": "array", "items": inner, "minItems": n, "maxItems": n}),
                config=self._bound(n))
            rows = list(out.citations)
        citations = [[str(c).strip().strip("[]") for c in row] for row in rows]
        if len(citations) != n:
            raise StageOutputError(f"{len(citations)} citation lists for {n} answer sentences")
        return citations

    def _allowed(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> list[list[str] | None]:
        """Per answer sentence, the ids its reply may cite (None: any note sentence)."""
        if self.candidates is None:
            return [None] * len(answer_sentences)
        if self.embedder is None:
            raise ConfigError("program.alignment.candidates needs the program's embedder")
        pool = [s for s in sentences if not is_header(s.text)] or sentences
        sims = cosine_matrix(self.embedder, [a.text for a in answer_sentences], [s.text for s in pool])
        order = {s.id: i for i, s in enumerate(sentences)}
        allowed = []
        for row in sims:
            top = sorted(range(len(pool)), key=lambda j: -float(row[j]))[: self.candidates]
            allowed.append(sorted((pool[j].id for j in top), key=order.__getitem__))  # in the note's order
        return allowed

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        if not answer_sentences:
            return dspy.Prediction(alignment=[], dropped_ids=0, fallback=None, degenerate=None)
        try:
            citations = self._citations(answer_sentences, sentences)
        except RECOVERABLE as exc:
            # Conservative: an unparsable alignment claims no support rather than guessing links.
            empty = [{"answer_id": a.id, "evidence_id": []} for a in answer_sentences]
            return dspy.Prediction(alignment=empty, dropped_ids=0, fallback=failure_reason(exc), degenerate=None)
        valid_set = {s.id for s in sentences}
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
        degenerate = f"no citation for any of {len(alignment)} answer sentences" if all_empty(alignment) else None
        return dspy.Prediction(alignment=alignment, dropped_ids=dropped, fallback=None, degenerate=degenerate)
