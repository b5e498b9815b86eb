"""Stage 2 without an API LM, learned, with a reader: a small LM's hidden state of each (question, sentence) prompt
gives, through its own regression (evidence/reader_fit.py), one more column beside the learned head's. Its state is
its own (`experiment=reader`). Numbers: benchmarks/README.md ("The reader").
"""

from __future__ import annotations

import copy
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.logistic_fit import C_GRID
from common.parameters import LOGISTIC_FORMAT, LearnedStateError, LogisticHead
from lms.reader import GGUFReader
from programs.archehr.evidence.embedding import DEFAULT_CUTS
from programs.archehr.evidence.features import EVIDENCE_FEATURE_SET, EVIDENCE_FEATURES, evidence_features
from programs.archehr.evidence.fit import EvidenceCase, HeadColumns, evidence_cases
from programs.archehr.evidence.learned import LearnedEvidenceScorer
from programs.archehr.evidence.reader_fit import fit_stacked, reader_log_odds
from programs.archehr.shared.heads import training_cases
from retrieval.embed import Embedder

# the reader regression's L2 strengths (smaller is stronger): hundreds of columns against ~1,700 training sentences
# need stronger ones than the head's own grid (common/logistic_fit.C_GRID)
READER_C_GRID = (0.003, 0.01, 0.03, 0.1)
NOT_FITTED = ("program/archehr/evidence=reader: program.compiled holds no head fitted with the reader "
              "(experiment=reader loads data/archehr/compiled_reader.json; task=compile "
              "experiment=compile_reader_heads fits one)")


class ReaderHead(LogisticHead):
    """The head over the learned columns + the reader's log-odds, with the reader's own regression in its state. The
    shipped program's evidence head (no reader) loads as not fitted: a compile may start from it, a run says which
    state to load."""

    def __init__(self, feature_set: str, features: tuple[str, ...], embedder: str, reader_feature_set: str,
                 reader_features: tuple[str, ...]) -> None:
        super().__init__(feature_set, features, embedder)
        self.reader = LogisticHead(reader_feature_set, reader_features)

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        state = super().dump_state(json_mode)
        return {**state, "reader": self.reader.dump_state(json_mode)} if self.fitted else state

    def load_state(self, state: Any) -> LogisticHead:
        if isinstance(state, dict) and state.get("format") == LOGISTIC_FORMAT and (
                state.get("feature_set") == EVIDENCE_FEATURE_SET):
            self.coef = None
            return self
        super().load_state(state)
        if self.fitted:
            if not isinstance(state.get("reader"), dict):
                raise LearnedStateError(f"the {self.feature_set} head: its state holds no reader regression")
            # a new object, not the one a shallow copy shares: a state that fails later leaves this one as it was
            self.reader = copy.copy(self.reader).load_state(state["reader"])
        return self

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        if not self.fitted:
            raise LearnedStateError(NOT_FITTED)
        return super().probabilities(x)


class ReaderEvidenceScorer(LearnedEvidenceScorer):
    """The learned evidence head with the reader's log-odds as one more column."""

    def __init__(self, embedder: Embedder, reader: GGUFReader, anchor: str = "both", threshold: float | None = None,
                 relative: float | None = None, min_selected: int | None = None,
                 cuts: tuple[float, ...] = DEFAULT_CUTS) -> None:
        super().__init__(embedder, anchor, threshold, relative, min_selected, cuts)
        self.reader = reader
        # the reader's identity is in the sets' names: its columns are numbered, so only the names tell readings apart
        self.reader_names = tuple(f"reader_{i}" for i in range(reader.dim))
        self.scorer = ReaderHead(f"{EVIDENCE_FEATURE_SET}+reader_log_odds/1:{reader.name}",
                                 (*EVIDENCE_FEATURES, "reader_log_odds"), f"{embedder.name}+{reader.name}",
                                 f"reader/1:{reader.name}", self.reader_names)

    def _own_and_vectors(self, question: str, narrative: str, texts: list[str]) -> np.ndarray:
        """The learned head's columns and the reader's vector of each sentence, side by side."""
        own = evidence_features(self.embedder, question, narrative, texts)
        if not texts:
            return np.zeros((0, own.shape[1] + len(self.reader_names)))
        return np.hstack([own, self.reader.read(question, texts, narrative).astype(float)])

    def columns(self) -> HeadColumns:
        def features(question: str, narrative: str, texts: list[str]) -> np.ndarray:
            both = self._own_and_vectors(question, narrative, texts)
            own, vectors = both[:, :len(EVIDENCE_FEATURES)], both[:, len(EVIDENCE_FEATURES):]
            if not self.scorer.fitted:
                raise LearnedStateError(NOT_FITTED)
            return np.column_stack([own, reader_log_odds(self.scorer.reader, vectors)])

        return HeadColumns(self.scorer.feature_set, self.scorer.features, features, C_GRID)

    def selection(self) -> dict[str, Any]:
        if not self.scorer.fitted:
            raise LearnedStateError(NOT_FITTED)
        return super().selection()

    def fit(self, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None, program: Any = None,
            c: float | None = None) -> dict[str, Any]:
        """The reader's regression and the head on the training cases, the questions from the program's own stage 1;
        `c`: the head's L2 strength (None: chosen by inner cross-validation; the reader's always is)."""
        question = getattr(program, "question", None)
        if question is None:
            raise ConfigError("the reader's evidence head is fitted inside its program (its question stage makes the "
                              "questions it reads): task=compile with optimizer=logistic or optimizer=fit")
        cases, key = training_cases(trainset, "the reader's evidence head")
        if not any(key[c_.case_id].essential for c_ in cases):
            raise ConfigError("the reader's evidence head: no training case has an essential sentence in "
                              "data.train_key")
        raw = HeadColumns("raw", (), self._own_and_vectors)
        both = evidence_cases(cases, key, question, self.embedder, raw)
        n = len(EVIDENCE_FEATURES)
        own = [EvidenceCase(c_.case_id, c_.x[:, :n], c_.y, c_.candidates, c_.ids, c_.supplementary) for c_ in both]
        part = fit_stacked(own, {c_.case_id: c_.x[:, n:] for c_ in both}, self.columns(),
                           self.scorer.reader.feature_set, self.reader_names, READER_C_GRID, c)
        head = part["scorer"]
        self.scorer.set(head.mean, head.scale, head.coef, head.intercept, part["selection"],
                        {**part["fit"], "case_ids": sorted(c_.case_id for c_ in cases)})
        reader = part["reader"]
        self.scorer.reader.set(reader.mean, reader.scale, reader.coef, reader.intercept)
        return self.scorer.fit
