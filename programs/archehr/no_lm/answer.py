"""Stage 3 without an LM: the selected evidence sentences, in note order, headers dropped, within the soft cut."""

from __future__ import annotations

import dspy

from programs.archehr.no_lm.evidence import is_header
from programs.archehr.text import check_answer_limits, soft_cut
from tasks.archehr.data import NoteSentence


class ExtractiveAnswer(dspy.Module):
    def __init__(self, max_words: int, soft_cut_ratio: float) -> None:
        super().__init__()
        check_answer_limits(max_words, soft_cut_ratio)
        self.max_words = max_words
        self.soft_cut_ratio = soft_cut_ratio

    def forward(self, clinician_question: str, evidence: list[NoteSentence], note_excerpt: str) -> dspy.Prediction:
        kept = [s.text.strip() for s in evidence if not is_header(s.text)]
        text = " ".join(t if t.endswith((".", "!", "?")) else t + "." for t in kept)
        return dspy.Prediction(answer=soft_cut(text, self.max_words, self.soft_cut_ratio), fallback=None)
