"""`ReaderVerifier`: does the note support an answer sentence, as a small LM reads it? A logistic head over the
reader's last hidden state gives P(not supported). `fit` learns from hand-written fabrications against the training
reference sentences (script-made ones taught a head nothing: AUC 0.50, benchmarks/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError, number_in
from common.logistic_fit import fit_scorer, folds
from common.parameters import LearnedStateError, LogisticHead
from lms.reader import GGUFReader
from programs.archehr.grounding.verdicts import MAX_PREMISE_SENTENCES, NOT_IN_NOTE, SUPPORTED
from tasks.archehr.data import Case, KeyCase, NoteSentence
from tasks.archehr.fabrications import load_fabrications

C_GRID = (0.0001, 0.0003, 0.001, 0.003, 0.01)  # hundreds of columns against a few hundred sentences: strong L2
CV_FOLDS = 5
NOT_FITTED = ("program/archehr/grounding=reader: program.compiled holds no reader verifier fitted with this reader "
              "(experiment=reader_verifier loads the Qwen's; task=compile experiment=compile_reader_verifier fits one)")
NO_TRAINING_PAIRS = ("the verifier's training cases have no reference answer sentences with citations (data.train "
                     "needs ArchEHR XML cases with a key)")


class ReaderVerifier(dspy.Module):
    def __init__(self, reader: GGUFReader, threshold: float | None = None, max_false_flags: float = 0.04,
                 fabrications: Sequence[str] = ()) -> None:
        super().__init__()
        threshold = number_in("program.grounding.verifier.threshold", threshold, 0, 1, low_open=True, null=True)
        max_false_flags = number_in("program.grounding.verifier.max_false_flags", max_false_flags, 0, 1, high_open=True)
        if isinstance(fabrications, str):
            fabrications = [fabrications]
        self.reader = reader
        self.threshold_setting, self.max_false_flags = threshold, max_false_flags
        self.fabrications = [str(f) for f in fabrications or ()]
        # the reader's identity is in the set's name: its columns are numbered, so only the name tells readings apart
        self.weights = LogisticHead(f"reader_verifier/1:{reader.name}", tuple(f"reader_{i}" for i in range(reader.dim)))

    @property
    def threshold(self) -> float:
        if self.threshold_setting is not None:
            return float(self.threshold_setting)
        if not self.weights.fitted:
            raise LearnedStateError(NOT_FITTED)
        return float(self.weights.selection["threshold"])

    def probabilities(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> np.ndarray:
        """P(not supported) of each answer sentence read after its note sentences."""
        if not hypotheses:
            return np.zeros(0)
        notes = [list(p)[:MAX_PREMISE_SENTENCES] for p in premises]
        x = self.reader.read_claims(notes, list(hypotheses)).astype(float)
        if not self.weights.fitted:
            raise LearnedStateError(NOT_FITTED)
        return self.weights.probabilities(x)

    def forward(self, answer_sentence: str, note_sentences: Sequence[NoteSentence]) -> dspy.Prediction:
        premise = list(note_sentences)[:MAX_PREMISE_SENTENCES]
        unsupported = float(self.probabilities([[s.text for s in premise]], [answer_sentence])[0])
        flagged = unsupported >= self.threshold
        # the reader says whether, not how: "not in the note" is what a flag knows
        return dspy.Prediction(verdict=NOT_IN_NOTE if flagged else SUPPORTED, probability=round(unsupported, 4))

    # --- fitting --------------------------------------------------------------------------------------------------
    def _fabricated(self, examples: Sequence[dspy.Example]) -> list[tuple[str, list[str], str]]:
        """(case id, cited note texts, text) of every fabrication the files hold for `examples`' cases."""
        cases = {ex.case.case_id: ex.case for ex in examples}
        out = []
        for path in self.fabrications:
            for case_id, made in load_fabrications(path, list(cases.values()), other_cases=True).items():
                by_id = {s.id: s.text for s in cases[case_id].sentences}
                out += [(case_id, [by_id[i] for i in f.citations][:MAX_PREMISE_SENTENCES], f.text) for f in made]
        return out

    def preflight(self, trainset: Sequence[dspy.Example]) -> None:
        if not any(getattr(ex, "key", None) is not None for ex in trainset):
            raise ConfigError(NO_TRAINING_PAIRS)
        if not self.fabrications:
            raise ConfigError("the reader verifier learns from hand-written fabrications of its training cases: set "
                              "program.grounding.verifier.fabrications (grounding-fabrications/1 files)")

    def fit(self, trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example],
            log: Callable[[str], None] = print) -> dict[str, Any]:
        """Fit the head on `trainset`'s reference sentences and fabrications, choose the threshold on `valset`'s
        reference sentences; `refused` says why the result should not be adopted."""
        started = time.time()
        self.preflight(trainset)
        train = [ex for ex in trainset if getattr(ex, "key", None) is not None]
        val = [ex for ex in valset if getattr(ex, "key", None) is not None]
        train_ids = {ex.case.case_id for ex in train}
        made = self._fabricated([*train, *[ex for ex in val if ex.case.case_id not in train_ids]])
        rows = [(ex.case.case_id, cited, text, 0) for ex in train for text, cited in cited_answers(ex.case, ex.key)]
        rows += [(cid, cited, text, 1) for cid, cited, text in made if cid in train_ids]
        if not any(label for *_, label in rows):
            raise ConfigError("program.grounding.verifier.fabrications: none of them is of a training case "
                              f"({len(train_ids)} cases in data.train)")
        log(f"reader verifier: reading {len(rows)} training sentences ({sum(r[3] for r in rows)} fabricated)")
        x = self.reader.read_claims([r[1] for r in rows], [r[2] for r in rows]).astype(float)
        y = np.array([r[3] for r in rows])
        supported = [(cited, text) for ex in val for text, cited in cited_answers(ex.case, ex.key)]
        held = [(cited, text) for cid, cited, text in made if cid not in train_ids]
        held_x = self.reader.read_claims([p for p, _ in [*supported, *held]], [h for _, h in [*supported, *held]])
        held_y = np.array([0] * len(supported) + [1] * len(held))
        c, auc = self._choose_c(x, y, [r[0] for r in rows], held_x.astype(float), held_y)
        head = fit_scorer(x, y, self.weights.features, c, self.weights.feature_set, class_weight="balanced")
        self.weights.set(head.mean, head.scale, head.coef, head.intercept, {"threshold": 0.5})
        probabilities = self.weights.probabilities(held_x.astype(float)) if len(held_x) else np.zeros(0)
        scores = probabilities[:len(supported)]
        threshold = flag_threshold(scores, self.max_false_flags)
        caught = probabilities[len(supported):] >= threshold
        fit: dict[str, Any] = {
            "training_sentences": len(rows), "training_fabricated": int(y.sum()), "training_cases": len(train_ids),
            "C": c, "C_chosen_on": "validation" if held else "training cases' CV", "auc": round(auc, 4),
            "validation_reference_sentences": len(scores),
            "max_false_flags": self.max_false_flags,
            "validation_false_flags": round(float((scores >= threshold).mean()), 4) if len(scores) else None,
            "validation_fabricated": len(held),
            "validation_recall": round(float(caught.mean()), 4) if len(held) else None,
            "seconds": round(time.time() - started, 1)}
        self.weights.set(head.mean, head.scale, head.coef, head.intercept, {"threshold": threshold}, fit)
        log(f"reader verifier: threshold {threshold:.3f}; validation false flags {fit['validation_false_flags']} of "
            f"{len(scores)} reference sentences, recall {fit['validation_recall']} of {len(held)} fabricated")
        recall, false_flags = fit["validation_recall"], fit["validation_false_flags"]
        if recall is not None and false_flags is not None and recall <= false_flags:  # the saved program is kept
            fit["refused"] = (f"it flags {recall:.0%} of the validation fabrications and {false_flags:.0%} of the "
                              "correct sentences (no better than chance)")
        return fit

    def _choose_c(self, x: np.ndarray, y: np.ndarray, case_ids: list[str], val_x: np.ndarray,
                  val_y: np.ndarray) -> tuple[float, float]:
        """The C of `C_GRID` that ranks the fabrications best, and that AUC: on the validation cases when they have
        fabrications (what transfers to another writer's: the training cases' own CV preferred a weaker L2 that ranked
        them worse), else on the training cases' case-grouped out-of-fold scores."""
        from sklearn.metrics import roc_auc_score

        cases = sorted(set(case_ids))
        of_case = np.array([cases.index(c) for c in case_ids])
        best = (C_GRID[0], -1.0)
        for c in C_GRID:
            if 0 < val_y.sum() < len(val_y):
                head = fit_scorer(x, y, self.weights.features, c, class_weight="balanced")
                auc = float(roc_auc_score(val_y, head.probabilities(val_x)))
            else:
                oof = np.zeros(len(y))
                for held in folds(len(cases), min(CV_FOLDS, len(cases))):
                    test = np.isin(of_case, held)
                    if test.all() or len(set(y[~test].tolist())) < 2:
                        continue
                    oof[test] = fit_scorer(x[~test], y[~test], self.weights.features, c,
                                           class_weight="balanced").probabilities(x[test])
                auc = float(roc_auc_score(y, oof)) if 0 < y.sum() < len(y) else 0.5
            if auc > best[1] + 1e-9:
                best = (c, auc)
        return best


def cited_answers(case: Case, key_case: KeyCase) -> list[tuple[str, list[str]]]:
    """(reference answer sentence, the texts of at most MAX_PREMISE_SENTENCES note sentences it cites) of each that
    cites one."""
    by_id = {s.id: s.text for s in case.sentences}
    out = []
    for _, text, cites in key_case.answer_sentences:
        cited = [by_id[i] for i in cites if i in by_id][:MAX_PREMISE_SENTENCES]
        if cited:
            out.append((text, cited))
    return out


def flag_threshold(scores: np.ndarray, max_false_flags: float) -> float:
    """The lowest threshold on P(not supported) that flags at most `max_false_flags` of these supported sentences'
    scores (0.5 when there are none to choose on)."""
    if len(scores) == 0:
        return 0.5
    ranked = np.sort(np.asarray(scores, dtype=float))[::-1]
    allowed = int(np.floor(max_false_flags * len(ranked)))
    above = ranked[allowed] if allowed < len(ranked) else 0.0
    return float(min(1.0, np.nextafter(above, 2.0)))
