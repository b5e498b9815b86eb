"""Stage 4 without an LM, learned: P(cited) per (answer sentence, note sentence) pair from a logistic head (a DSPy
parameter, `scorer`) over alignment/features.py, fitted with its selection rule by alignment/fit.py. Per answer
sentence: pairs with P >= `threshold` and >= `relative` x its best, at most `max_citations`, at least `min_links`; a
value set in the config overrides the fitted one."""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError, number_in
from common.parameters import LogisticHead
from programs.archehr.alignment.features import ALIGNMENT_FEATURE_SET, ALIGNMENT_FEATURES, alignment_features
from programs.archehr.alignment.fit import alignment_cases, fit_alignment
from programs.archehr.shared.heads import fitted_selection, override, training_cases
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.selection import select_links
from retrieval.embed import Embedder
from tasks.archehr.data import AnswerSentence, NoteSentence


class LearnedAligner(dspy.Module):
    """P(cited) per (answer sentence, note sentence) pair from a fitted logistic scorer."""

    uses_lm = False

    def __init__(self, embedder: Embedder, max_citations: int = 3, threshold: float | None = None,
                 relative: float | None = None, min_links: int | None = None) -> None:
        super().__init__()
        self.embedder = embedder
        where = "program.alignment"
        self.max_citations = number_in(f"{where}.max_citations", max_citations, 1, integer=True)
        self.overrides = {"threshold": override(f"{where}.threshold", threshold, 0, 1),
                          "relative": override(f"{where}.relative", relative, 0, 1),
                          "min_links": override(f"{where}.min_links", min_links, 0, integer=True)}
        self.scorer = LogisticHead(ALIGNMENT_FEATURE_SET, ALIGNMENT_FEATURES, embedder.name)

    def selection(self) -> dict[str, Any]:
        return fitted_selection(self.scorer, self.overrides, "program.alignment")

    def preflight(self, trainset: list[dspy.Example]) -> None:
        """What fit needs of `trainset`, checked before the compile's scoring."""
        training_cases(trainset, "the learned alignment head")

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None, program: Any = None,
            c: float | None = None) -> dict[str, Any]:
        """Fit the scorer and its selection rule on the training cases' reference answer sentences and citations."""
        cases, key = training_cases(trainset, "the learned alignment head")
        if not any(key[c_.case_id].answer_sentences for c_ in cases):
            raise ConfigError("the learned alignment head needs clinician_answer_sentences with citations in "
                              "data.train_key; choose program/archehr/alignment=similarity to fit evidence only")
        part = fit_alignment(alignment_cases(cases, key, self.embedder), self.max_citations, c)
        fit = {**part["fit"], "case_ids": sorted(c_.case_id for c_ in cases)}
        head = part["scorer"]
        self.scorer.set(head.mean, head.scale, head.coef, head.intercept, part["selection"], fit)
        return fit

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        candidates = [s for s in sentences if not is_header(s.text)]
        if not answer_sentences or not candidates:
            return dspy.Prediction(alignment=[{"answer_id": a.id, "evidence_id": []} for a in answer_sentences],
                                   dropped_ids=0, fallback=None)
        rule = self.selection()
        p = self.scorer.probabilities(alignment_features(self.embedder, [a.text for a in answer_sentences],
                                                         [s.text for s in candidates]))
        alignment = []
        for answer, row in zip(answer_sentences, p, strict=True):
            links = select_links(row, float(rule["threshold"]), float(rule["relative"]), self.max_citations,
                                 int(rule["min_links"]))
            alignment.append({"answer_id": answer.id, "evidence_id": sorted((candidates[j].id for j in links),
                                                                            key=[s.id for s in candidates].index)})
        return dspy.Prediction(alignment=alignment, dropped_ids=0, fallback=None)
