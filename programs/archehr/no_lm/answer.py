"""Stage 3 without an LM: the selected evidence sentences, headers dropped, within the answer's word limit.

`choose: note_order` takes them in note order and cuts at the limit (the soft cut), so the sentences that answer the
question can be the ones cut when the evidence runs long. `choose: question` keeps whole sentences: when the evidence
is over the limit, the sentences closest to the clinician question (cosine with the program's embedder) are taken
first while they fit, then put back in note order; a first sentence over the limit alone is soft-cut as before.
Measured on the 34 dev cases (validation; benchmarks/README.md, "The extractive answer"): Subtask 3 overall 33.3 ->
41.8 with `question` (keeping whole sentences in note order instead, without the ranking: 33.6).
"""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError
from programs.archehr.no_lm.evidence import is_header
from programs.archehr.no_lm.similarity import cosine_matrix
from programs.archehr.text import check_answer_limits, soft_cut
from tasks.archehr.data import NoteSentence

CHOICES = ("note_order", "question")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


class ExtractiveAnswer(dspy.Module):
    def __init__(self, max_words: int, soft_cut_ratio: float, choose: str = "question",
                 embedder: Any = None) -> None:
        super().__init__()
        check_answer_limits(max_words, soft_cut_ratio)
        if choose not in CHOICES:
            raise ConfigError(f"program.answer.choose must be one of {list(CHOICES)}, not {choose!r}")
        self.max_words, self.soft_cut_ratio, self.choose, self.embedder = max_words, soft_cut_ratio, choose, embedder

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str) -> dspy.Prediction:
        kept = [_sentence(s.text) for s in evidence if not is_header(s.text)]
        if self.choose == "question" and self.embedder is not None and \
                sum(len(t.split()) for t in kept) > self.max_words:
            kept = self.closest_that_fit(clinician_question, kept)
        return dspy.Prediction(answer=soft_cut(" ".join(kept), self.max_words, self.soft_cut_ratio), fallback=None)

    def closest_that_fit(self, question: str, sentences: list[str]) -> list[str]:
        """The sentences closest to the question that fit in `max_words` together, in note order (the closest one
        alone when none fits)."""
        sims = cosine_matrix(self.embedder, [question], sentences)[0]
        chosen, words = [], 0
        for i in sorted(range(len(sentences)), key=lambda i: -float(sims[i])):
            n = len(sentences[i].split())
            if words + n <= self.max_words:
                chosen.append(i)
                words += n
        if not chosen:
            chosen = [int(max(range(len(sentences)), key=lambda i: float(sims[i])))]
        return [sentences[i] for i in sorted(chosen)]
