"""Stage 2 without an LM, learned: P(essential) per note sentence from a logistic head (a DSPy parameter, `scorer`)
over evidence/features.py, fitted with its selection rule by evidence/fit.py. Selected: P >= `threshold` (or >=
`relative` x the note's best), at least `min_selected`; a value set in the config overrides the fitted one."""

from __future__ import annotations

from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.parameters import LogisticHead
from programs.archehr.evidence.embedding import DEFAULT_CUTS, to_likert
from programs.archehr.evidence.features import EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES
from programs.archehr.evidence.fit import HeadColumns, evidence_cases, fit_evidence, learned_columns
from programs.archehr.shared.heads import fitted_selection, override, training_cases
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.selection import select_by_probability
from programs.archehr.stages import anchor_parts, check_anchor
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence


class LearnedEvidenceScorer(dspy.Module):
    """P(essential) per note sentence from a fitted logistic scorer; Likert scores for display from P (4-5 for the
    selected sentences, 1-3 for the others)."""

    uses_lm = False

    def __init__(self, embedder: Embedder, anchor: str = "both", threshold: float | None = None,
                 relative: float | None = None, min_selected: int | None = None,
                 cuts: tuple[float, ...] = DEFAULT_CUTS) -> None:
        super().__init__()
        self.embedder = embedder
        self.anchor = check_anchor(anchor)
        where = "program.evidence"
        self.overrides = {"threshold": override(f"{where}.threshold", threshold, 0, 1),
                          "relative": override(f"{where}.relative", relative, 0, 1),
                          "min_selected": override(f"{where}.min_selected", min_selected, 0, integer=True)}
        self.scorer = LogisticHead(EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES, embedder.name)
        self.cuts = tuple(cuts)

    def selection(self) -> dict[str, Any]:
        return fitted_selection(self.scorer, self.overrides, "program.evidence")

    def columns(self) -> HeadColumns:
        """The scorer's columns and how they are computed (evidence/reader.py adds the reader's)."""
        return learned_columns(self.embedder)

    def preflight(self, trainset: list[dspy.Example]) -> None:
        """What fit needs of `trainset`, checked before the compile's scoring."""
        training_cases(trainset, "the learned evidence head")

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None, program: Any = None,
            c: float | None = None) -> dict[str, Any]:
        """Fit the scorer and its selection rule on the training cases, the features computed with the program's own
        question stage, as a run computes them; `c`: the L2 strength (None: chosen by inner cross-validation)."""
        question = getattr(program, "question", None)
        if question is None:
            raise ConfigError("the learned evidence head is fitted inside its program (its question stage makes the "
                              "questions its features use): task=compile with optimizer=logistic or optimizer=fit")
        cases, key = training_cases(trainset, "the learned evidence head")
        if not any(key[c_.case_id].essential for c_ in cases):
            raise ConfigError("the learned evidence head: no training case has an essential sentence in data.train_key")
        columns = self.columns()
        part = fit_evidence(evidence_cases(cases, key, question, self.embedder, columns), c, columns=columns)
        fit = {**part["fit"], "case_ids": sorted(c_.case_id for c_ in cases)}
        head = part["scorer"]
        self.scorer.set(head.mean, head.scale, head.coef, head.intercept, part["selection"], fit)
        return fit

    def forward(self, clinician_question: str, patient_narrative: str,
                sentences: list[NoteSentence]) -> dspy.Prediction:
        rule = self.selection()
        question, narrative = anchor_parts(self.anchor, clinician_question, patient_narrative)
        x = self.columns().features(question, narrative, [s.text for s in sentences])
        p = np.where([is_header(s.text) for s in sentences], 0.0, self.scorer.probabilities(x))
        candidates = np.array([not is_header(s.text) for s in sentences], dtype=bool)
        chosen = select_by_probability(p, candidates, float(rule["threshold"]), float(rule["relative"]),
                                 int(rule["min_selected"]))
        best = float(p.max()) if len(p) else 0.0
        chosen_set = set(chosen)
        # display scores agree with the selection: 4-5 selected, 1-3 not (P / the note's best P by `cuts`)
        scores = [1 if is_header(s.text) else (max(4, likert) if i in chosen_set else min(3, likert))
                  for i, (s, likert) in enumerate(zip(sentences, (to_likert(float(x) / best if best > 0 else 0.0,
                                                                           self.cuts) for x in p), strict=True))]
        return dspy.Prediction(evidence_ids=[sentences[i].id for i in chosen],
                               scores=dict(zip([s.id for s in sentences], scores, strict=True)),
                               relevance={s.id: round(float(x), 4) for s, x in zip(sentences, p, strict=True)},
                               selection="learned", fallback=None)
