"""Stage 3 without an LM: the selected evidence sentences, headers dropped, within the answer's word limit.

Over the limit, `choose` says which sentences stay: `note_order` cuts at the limit; `question` keeps whole sentences
closest to the clinician question first, then back in note order; `evidence` (the default) ranks by the evidence
stage's scores, the question breaking ties. A first sentence over the limit alone is soft-cut in each mode.
Subtask 3 on dev / realistic a / b (benchmarks/README.md): note_order 33.3 / 26.9 / 27.3, question 41.8 / 31.7 /
33.8, evidence 41.4 / 33.6 / 36.0."""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError
from common.note_text import ends_sentence
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.similarity import cosine_matrix
from programs.archehr.text import check_answer_limits, soft_cut
from tasks.archehr.data import NoteSentence

CHOICES = ("note_order", "question", "evidence")


def _sentence(text: str) -> str:
    text = text.strip()
    return text if ends_sentence(text) else text + "."  # "x.\u202c" ends already: no "x.."


class ExtractiveAnswer(dspy.Module):
    def __init__(self, max_words: int, soft_cut_ratio: float, choose: str = "evidence",
                 embedder: Any = None) -> None:
        super().__init__()
        check_answer_limits(max_words, soft_cut_ratio)
        if choose not in CHOICES:
            raise ConfigError(f"program.answer.choose must be one of {list(CHOICES)}, not {choose!r}")
        self.max_words, self.soft_cut_ratio, self.choose, self.embedder = max_words, soft_cut_ratio, choose, embedder

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str,
                scores: dict[str, float] | None = None) -> dspy.Prediction:
        """`scores`: the evidence stage's {sentence id: Likert score}, which `choose: evidence` ranks by first."""
        kept = [s for s in evidence if not is_header(s.text)]
        texts = [_sentence(s.text) for s in kept]
        if self.choose != "note_order" and self.embedder is not None and \
                sum(len(t.split()) for t in texts) > self.max_words:
            first = [float((scores or {}).get(s.id, 0.0)) if self.choose == "evidence" else 0.0 for s in kept]
            texts = self.best_that_fit(clinician_question, texts, first)
        return dspy.Prediction(answer=soft_cut(" ".join(texts), self.max_words, self.soft_cut_ratio), fallback=None)

    def best_that_fit(self, question: str, sentences: list[str], first: list[float]) -> list[str]:
        """The sentences ranked by `first` (then by cosine to the question) that fit in `max_words` together, in
        note order (the best one alone when none fits)."""
        sims = cosine_matrix(self.embedder, [question], sentences)[0]
        rank = sorted(range(len(sentences)), key=lambda i: (-first[i], -float(sims[i])))
        chosen, words = [], 0
        for i in rank:
            n = len(sentences[i].split())
            if words + n <= self.max_words:
                chosen.append(i)
                words += n
        if not chosen:
            chosen = [rank[0]]
        return [sentences[i] for i in sorted(chosen)]
