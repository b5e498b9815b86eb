"""Stages 2 and 4 without an LM, learned: a logistic scorer over features (`features.py`) and a selection rule,
both fitted against the subtask's metric by their own `fit` (programs/archehr/no_lm/fitting.py), which
`optimizer=logistic` (optimizers/logistic.py) calls. The scorer is a DSPy
parameter of the stage (`scorer`, a `common.parameters.LogisticHead`): saved by `program.save()` and loaded with
the compiled program (`program.compiled`, by default the shipped one).

Evidence: P(essential) per note sentence; the sentences with P >= `threshold` (or >= `relative` x the note's best),
at least `min_selected`. Alignment: P(cited) per (answer sentence, note sentence) pair; per answer sentence the
pairs with P >= `threshold` and >= `relative` x its best, at most `max_citations`, at least `min_links`. The fitted
values come from the state; a value set in the stage's config overrides the state's (for sweeps).
"""

from __future__ import annotations

from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.parameters import LearnedStateError, LogisticHead
from programs.archehr.no_lm.evidence import DEFAULT_CUTS, is_header, to_likert
from programs.archehr.no_lm.features import (
    ALIGNMENT_FEATURE_SET,
    ALIGNMENT_FEATURES,
    EVIDENCE_FEATURE_SET,
    EVIDENCE_FEATURES,
    alignment_features,
    evidence_features,
    split_anchor,
)
from programs.archehr.no_lm.selection import select_by_probability, select_links
from programs.archehr.stages import check_anchor
from retrieval.embed import Embedder
from tasks.archehr.data import AnswerSentence, NoteSentence


def _check(where: str, name: str, value: Any, low: float, high: float | None, integer: bool = False) -> Any:
    """A configured override: a number in [low, high] (an integer when `integer`), or None (the fitted value)."""
    if value is None:
        return None
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    if not ok or value < low or (high is not None and value > high) or value != value:
        bounds = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{where}.{name} must be {'an integer' if integer else 'a number'} {bounds} or null (the "
                          f"fitted value), not {value!r}")
    return value


def _selection(head: LogisticHead, overrides: dict[str, Any], where: str) -> dict[str, Any]:
    """The selection rule in use: each configured value, else the head's fitted one."""
    if not head.fitted:
        raise LearnedStateError(f"{where} (learned): its scorer is not fitted; load a compiled program "
                                "(program.compiled=PATH, the shipped one by default) or fit one: task=compile "
                                "optimizer=logistic")
    out = {}
    for name, value in overrides.items():
        chosen = value if value is not None else head.selection.get(name)
        if chosen is None:
            raise LearnedStateError(f"{where}.{name}: not in the fitted state and not set")
        out[name] = chosen
    return out


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
        self.overrides = {"threshold": _check(where, "threshold", threshold, 0.0, 1.0),
                          "relative": _check(where, "relative", relative, 0.0, 1.0),
                          "min_selected": _check(where, "min_selected", min_selected, 0, None, integer=True)}
        self.scorer = LogisticHead(EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES, embedder.name)
        self.cuts = tuple(cuts)

    def selection(self) -> dict[str, Any]:
        return _selection(self.scorer, self.overrides, "program.evidence")

    def preflight(self, trainset: list[dspy.Example]) -> None:
        """What fit needs of `trainset` (cases with a note and a key), checked before the compile's scoring."""
        from programs.archehr.no_lm.fitting import training_cases

        training_cases(trainset, "the learned evidence head")

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None, program: Any = None,
            c: float | None = None) -> dict[str, Any]:
        """Fit the scorer and its selection rule on the training cases (programs/archehr/no_lm/fitting.py), the
        features computed with the program's own question stage, as a run computes them; `c`: the L2 strength
        (None: chosen by inner cross-validation)."""
        from programs.archehr.no_lm.fitting import fit_evidence_head

        question = getattr(program, "question", None)
        if question is None:
            raise ConfigError("the learned evidence head is fitted inside its program (its question stage makes the "
                              "questions its features use): task=compile with optimizer=logistic or optimizer=fit")
        part = fit_evidence_head(trainset, question, self.embedder, c)
        head = part["scorer"]
        self.scorer.set(head.mean, head.scale, head.coef, head.intercept, part["selection"], part["fit"])
        return part["fit"]

    def probabilities(self, anchor: str, sentences: list[NoteSentence]) -> np.ndarray:
        question, narrative = split_anchor(anchor) if self.anchor == "both" else (anchor, anchor)
        x = evidence_features(self.embedder, question, narrative, [s.text for s in sentences])
        p = self.scorer.probabilities(x)
        return np.where([is_header(s.text) for s in sentences], 0.0, p)

    def forward(self, clinician_question: str, sentences: list[NoteSentence]) -> dspy.Prediction:
        rule = self.selection()
        p = self.probabilities(clinician_question, sentences)
        candidates = np.array([not is_header(s.text) for s in sentences], dtype=bool)
        chosen = select_by_probability(p, candidates, float(rule["threshold"]), float(rule["relative"]),
                                 int(rule["min_selected"]))
        best = float(p.max()) if len(p) else 0.0
        chosen_set = set(chosen)
        # Likert scores for display agree with the selection: 4-5 selected, 1-3 not (P / the note's best P by `cuts`)
        scores = [1 if is_header(s.text) else (max(4, likert) if i in chosen_set else min(3, likert))
                  for i, (s, likert) in enumerate(zip(sentences, (to_likert(float(x) / best if best > 0 else 0.0,
                                                                           self.cuts) for x in p), strict=True))]
        return dspy.Prediction(evidence_ids=[sentences[i].id for i in chosen],
                               scores=dict(zip([s.id for s in sentences], scores, strict=True)),
                               relevance={s.id: round(float(x), 4) for s, x in zip(sentences, p, strict=True)},
                               selection="learned", fallback=None)


class LearnedAligner(dspy.Module):
    """P(cited) per (answer sentence, note sentence) pair from a fitted logistic scorer."""

    uses_lm = False

    def __init__(self, embedder: Embedder, max_citations: int = 3, threshold: float | None = None,
                 relative: float | None = None, min_links: int | None = None) -> None:
        super().__init__()
        self.embedder = embedder
        where = "program.alignment"
        if isinstance(max_citations, bool) or not isinstance(max_citations, int) or max_citations < 1:
            raise ConfigError(f"{where}.max_citations must be an integer >= 1, not {max_citations!r}")
        self.max_citations = max_citations
        self.overrides = {"threshold": _check(where, "threshold", threshold, 0.0, 1.0),
                          "relative": _check(where, "relative", relative, 0.0, 1.0),
                          "min_links": _check(where, "min_links", min_links, 0, None, integer=True)}
        self.scorer = LogisticHead(ALIGNMENT_FEATURE_SET, ALIGNMENT_FEATURES, embedder.name)

    def selection(self) -> dict[str, Any]:
        return _selection(self.scorer, self.overrides, "program.alignment")

    def preflight(self, trainset: list[dspy.Example]) -> None:
        """What fit needs of `trainset` (cases with a note and a key), checked before the compile's scoring."""
        from programs.archehr.no_lm.fitting import training_cases

        training_cases(trainset, "the learned alignment head")

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None, program: Any = None,
            c: float | None = None) -> dict[str, Any]:
        """Fit the scorer and its selection rule on the training cases' reference answer sentences and citations
        (programs/archehr/no_lm/fitting.py)."""
        from programs.archehr.no_lm.fitting import fit_alignment_head

        part = fit_alignment_head(trainset, self.embedder, self.max_citations, c)
        head = part["scorer"]
        self.scorer.set(head.mean, head.scale, head.coef, head.intercept, part["selection"], part["fit"])
        return part["fit"]

    def probabilities(self, answer_sentences: list[AnswerSentence], candidates: list[NoteSentence]) -> np.ndarray:
        x = alignment_features(self.embedder, [a.text for a in answer_sentences], [s.text for s in candidates])
        return self.scorer.probabilities(x)

    def forward(self, answer_sentences: list[AnswerSentence], sentences: list[NoteSentence]) -> dspy.Prediction:
        candidates = [s for s in sentences if not is_header(s.text)]
        if not answer_sentences or not candidates:
            return dspy.Prediction(alignment=[{"answer_id": a.id, "evidence_id": []} for a in answer_sentences],
                                   dropped_ids=0, fallback=None)
        rule = self.selection()
        p = self.probabilities(answer_sentences, candidates)
        alignment = []
        for answer, row in zip(answer_sentences, p, strict=True):
            links = select_links(row, float(rule["threshold"]), float(rule["relative"]), self.max_citations,
                                 int(rule["min_links"]))
            alignment.append({"answer_id": answer.id, "evidence_id": sorted((candidates[j].id for j in links),
                                                                            key=[s.id for s in candidates].index)})
        return dspy.Prediction(alignment=alignment, dropped_ids=0, fallback=None)
