"""`GroundingJudge` (`program.grounding.judge=lm`): does the note support an answer sentence, as an LM judges it?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

import dspy

from common.failures import StageOutputError
from common.markup import strip_markup
from programs.archehr.grounding.verdicts import CONTRADICTED, NOT_IN_NOTE, SUPPORTED
from programs.archehr.text import numbered
from signatures.archehr import JudgeGrounding
from signatures.constrained import reply_bound, with_output_schema
from tasks.archehr.data import NoteSentence

VERDICTS = (SUPPORTED, CONTRADICTED, NOT_IN_NOTE)
KINDS = get_args(JudgeGrounding.output_fields["kind"].annotation)  # "none", the conflict kinds, "other"
REPLY_TOKENS = 96  # a verdict, a kind and a few quoted words
MAX_QUOTE_CHARS = 120


class GroundingJudge(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        # a quote, not an essay: a small model otherwise repeats itself up to the reply bound
        self.predict = dspy.Predict(with_output_schema(JudgeGrounding, "conflicting_words",
                                                       {"type": "string", "maxLength": MAX_QUOTE_CHARS}))

    def forward(self, answer_sentence: str, note_sentences: Sequence[NoteSentence] | str) -> dspy.Prediction:
        """`note_sentences`: the cited note sentences, or their `[id] text` lines (how examples and demos hold them)."""
        out = self.predict(answer_sentence=answer_sentence, note_sentences=note_lines(note_sentences),
                           config=reply_bound(REPLY_TOKENS))
        verdict = str(out.verdict).strip().lower()
        if verdict not in VERDICTS:
            raise StageOutputError(f"the judge answered {out.verdict!r}, not one of {VERDICTS}")
        kind = str(out.kind).strip().lower()
        words = strip_markup(str(out.conflicting_words or ""))[0].strip()[:MAX_QUOTE_CHARS]
        if verdict == SUPPORTED:
            kind, words = "none", ""
        elif kind not in KINDS or kind == "none":
            kind = "other"
        return dspy.Prediction(verdict=verdict, kind=kind, conflicting_words=words)


def note_lines(note_sentences: Sequence[NoteSentence] | str) -> str:
    if isinstance(note_sentences, str):
        return note_sentences
    return numbered((s.id, s.text) for s in note_sentences)
