"""Stage 2: score every note sentence 1-5 and select evidence (strict >= 4, lenient >= 3, else first 3)."""

from __future__ import annotations

import dspy

from common.errors import ConfigError, number_in
from common.failures import RECOVERABLE, StageOutputError, failure_reason
from programs.archehr.stages import anchor_text, check_anchor
from programs.archehr.text import numbered
from signatures.archehr import RateSentence, ScoreEvidence, ScoreEvidenceById
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import NoteSentence

LIKERT = [1, 2, 3, 4, 5]


def select_by_likert(sentences: list[NoteSentence], scores: list[int], strict_threshold: int, lenient_threshold: int,
                    fallback_count: int) -> tuple[list[str], str]:
    """The seed's selection: every sentence scored >= strict; else >= lenient; else the first `fallback_count`."""
    strict = [s.id for s, v in zip(sentences, scores, strict=True) if v >= strict_threshold]
    if strict:
        return strict, "strict"
    lenient = [s.id for s, v in zip(sentences, scores, strict=True) if v >= lenient_threshold]
    if lenient:
        return lenient, "lenient"
    return [s.id for s in sentences[:fallback_count]], "first_n"


FORMS = ("list", "by_id", "per_sentence")


def all_equal(scores: list[int], minimum: int = 3) -> bool:
    """A reply that scored every one of at least `minimum` sentences the same says nothing about any of them."""
    return len(scores) >= minimum and len(set(scores)) == 1


class LMEvidenceScorer(dspy.Module):
    """The LM gives every note sentence a Likert score; the seed's strict/lenient/first-n rule selects.

    `form`: `list` (the seed's: N integers in the sentences' order), `by_id` (sentence id -> score) or `per_sentence`
    (one call per sentence, the whole note first in every prompt, so `lm.client.prefix_reuse` reads it once per
    case). `group_size` scores the note in groups of that many, one call each. Every sentence scored the same is a
    `degenerate` output."""

    uses_lm = True

    def __init__(self, strict_threshold: int, lenient_threshold: int, fallback_count: int,
                 tokens_per_sentence: int | None = 4, anchor: str = "clinician_question", form: str = "list",
                 group_size: int | None = None) -> None:
        super().__init__()
        # clinician_question: the seed's choice (62.9 vs 60.2 F1 with the raw narrative)
        self.anchor = check_anchor(anchor)
        self.tokens_per_sentence = tokens_per_sentence  # reply bound: 32 + this per sentence (null: the LM's)
        self.strict_threshold = strict_threshold
        self.lenient_threshold = lenient_threshold
        self.fallback_count = fallback_count
        if form not in FORMS:
            raise ConfigError(f"program.evidence.form must be one of {', '.join(FORMS)}, not {str(form)[:40]!r}")
        number_in("program.evidence.group_size", group_size, 1, integer=True, null=True)
        if group_size is not None and form == "per_sentence":
            raise ConfigError("program.evidence.group_size applies to the list and by_id forms; per_sentence rates "
                              "one sentence per call (set group_size=null)")
        self.form, self.group_size = form, group_size
        signatures = {"list": ScoreEvidence, "by_id": ScoreEvidenceById, "per_sentence": RateSentence}
        self.score = dspy.Predict(signatures[form])

    def _rate_each(self, clinician_question: str, sentences: list[NoteSentence]) -> list[int]:
        note = numbered((s.id, s.text) for s in sentences)
        signature = with_output_schema(self.score.signature, "score", {"type": "integer", "enum": LIKERT})
        scores = []
        for s in sentences:
            out = self.score(clinician_question=clinician_question, note_sentences=note,
                             sentence=numbered([(s.id, s.text)]), signature=signature,
                             config=reply_bound(self.tokens_per_sentence and 16 + self.tokens_per_sentence))
            scores.append(int(out.score))
        if any(v not in LIKERT for v in scores):
            raise StageOutputError(f"scores outside 1-5: {sorted(set(scores) - set(LIKERT))}")
        return scores

    def _score_group(self, clinician_question: str, group: list[NoteSentence]) -> list[int]:
        n = len(group)
        ids = [s.id for s in group]
        likert = {"type": "integer", "enum": LIKERT}
        # One score per sentence, each 1-5: a grammar-capable backend cannot emit anything else.
        schema = ({"type": "array", "items": likert, "minItems": n, "maxItems": n} if self.form == "list" else
                  {"type": "object", "properties": {i: likert for i in ids}, "required": ids,
                   "additionalProperties": False})
        per_sentence = self.tokens_per_sentence and self.tokens_per_sentence + (4 if self.form == "by_id" else 0)
        out = self.score(
            clinician_question=clinician_question,
            note_sentences=numbered((s.id, s.text) for s in group),
            signature=with_output_schema(self.score.signature, "scores", schema),
            config=reply_bound(per_sentence and 32 + per_sentence * n),
        )
        if self.form == "by_id":
            got = {str(k).strip().strip("[]"): v for k, v in dict(out.scores).items()}
            if set(got) != set(ids):
                raise StageOutputError(f"scores for ids {sorted(got)[:5]}... not the {n} listed")
            values = [got[i] for i in ids]
        else:
            values = list(out.scores)
        scores = [int(v) for v in values]
        if len(scores) != n:
            raise StageOutputError(f"{len(scores)} scores for {n} sentences")
        if any(v not in LIKERT for v in scores):
            raise StageOutputError(f"scores outside 1-5: {sorted(set(scores) - set(LIKERT))}")
        return scores

    def forward(self, clinician_question: str, patient_narrative: str,
                sentences: list[NoteSentence]) -> dspy.Prediction:
        # the signature's `clinician_question` field reads the anchor: the question, the narrative or both
        clinician_question = anchor_text(self.anchor, clinician_question, patient_narrative)
        size = self.group_size or max(1, len(sentences))
        groups = [sentences[i:i + size] for i in range(0, len(sentences), size)]
        try:
            scores = (self._rate_each(clinician_question, sentences) if self.form == "per_sentence" else
                      [v for group in groups for v in self._score_group(clinician_question, group)])
        except RECOVERABLE as exc:
            ids = [s.id for s in sentences[: self.fallback_count]]
            return dspy.Prediction(evidence_ids=ids, scores=None, selection="fallback_first_n", fallback=failure_reason(exc),
                                   degenerate=None)
        ids, selection = select_by_likert(sentences, scores, self.strict_threshold, self.lenient_threshold,
                                          self.fallback_count)
        degenerate = f"every one of {len(scores)} sentences scored {scores[0]}" if all_equal(scores) else None
        return dspy.Prediction(
            evidence_ids=ids, scores=dict(zip([s.id for s in sentences], scores, strict=True)),
            selection=selection, fallback=None, degenerate=degenerate,
        )
