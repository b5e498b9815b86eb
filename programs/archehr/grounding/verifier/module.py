"""`LearnedVerifier`: does the note support an answer sentence? A multinomial logistic head over how the sentence's
tokens align with the note sentences it rests on (`features.py`) gives a probability per label: supported, a kind of
conflict (negation, direction, quantity, side/site, reason/attribution, time/order) or not in the note. The sentence
is flagged when P(not supported) reaches the threshold chosen on validation; its verdict is `contradicted` (a kind
of conflict is the most likely label) or `not in the note`, with the note sentence it rests on most (its tokens
matched best) as the one it conflicts with.

It says how it is fitted: `fit(trainset, valset)` makes training pairs from the training cases' reference answers
(`pairs.py`: paraphrases as supported, the same sentences with one fact changed as conflicts), fits the head, and
chooses the threshold on the validation cases: the lowest that flags at most `max_false_flags` of their reference
answer sentences. `optimizer=fit` (optimizers/fit_learned.py) calls it from `task=compile`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import dspy
import numpy as np

from common.errors import ClinprogError, ConfigError
from common.logistic_fit import standardisation
from programs.archehr.grounding.verdicts import CONTRADICTED, NOT_IN_NOTE, SUPPORTED
from programs.archehr.grounding.verifier.features import TokenAligner, feature_names
from programs.archehr.grounding.verifier.pairs import MAX_PREMISE_SENTENCES, Pair, cited_answers, note_pairs, training_pairs
from programs.archehr.grounding.verifier.perturb import CONFLICT_KINDS, LABELS
from programs.archehr.grounding.verifier.weights import VerifierWeights
from tasks.archehr.data import NoteSentence

NO_TRAINING_PAIRS = ("the verifier's training cases have no reference answer sentences with citations (data.train "
                     "needs ArchEHR XML cases with a key)")


class LearnedVerifier(dspy.Module):
    def __init__(self, embedder: Any, threshold: float | None = None, threads: int | str = "auto",
                 max_false_flags: float = 0.04, regularization: float = 0.1, rounds: int = 4,
                 note_pairs_per_case: int = 30, seed: int = 0) -> None:
        super().__init__()
        check_flag_settings(threshold, max_false_flags)
        if not float(regularization) > 0 or int(rounds) < 1 or int(note_pairs_per_case) < 0:
            raise ConfigError("program.grounding.verifier: regularization must be > 0, rounds >= 1 and "
                              "note_pairs_per_case >= 0")
        self.aligner = TokenAligner(embedder, threads)
        self.threshold_setting = threshold
        self.max_false_flags, self.regularization = float(max_false_flags), float(regularization)
        self.rounds, self.note_pairs_per_case, self.seed = int(rounds), int(note_pairs_per_case), int(seed)
        self.weights = VerifierWeights(LABELS)

    @property
    def threshold(self) -> float:
        return float(self.threshold_setting) if self.threshold_setting is not None else self.weights.threshold

    def _check_encoder(self) -> None:
        if self.weights.fitted and self.weights.encoder != self.aligner.model_name:
            raise ClinprogError(f"the verifier was fitted with embedder {self.weights.encoder!r}, this program uses "
                                f"{self.aligner.model_name!r}; fit it again (task=compile experiment=compile_verifier)")

    def probabilities(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> np.ndarray:
        self._check_encoder()
        if not hypotheses:
            return np.zeros((0, len(LABELS)))
        x = np.array([self.aligner.features(h, p) for p, h in zip(premises, hypotheses, strict=True)])
        return self.weights.probabilities(x)

    def forward(self, answer_sentence: str, note_sentences: Sequence[NoteSentence]) -> dspy.Prediction:
        premise = list(note_sentences)[:MAX_PREMISE_SENTENCES]
        p = self.probabilities([[s.text for s in premise]], [answer_sentence])[0]
        unsupported = float(1.0 - p[0])
        label = LABELS[1 + int(np.argmax(p[1:]))]
        flagged = unsupported >= self.threshold
        verdict = SUPPORTED if not flagged else (NOT_IN_NOTE if label == NOT_IN_NOTE else CONTRADICTED)
        conflict = None
        if flagged and premise:
            a_vec = self.aligner.tokens(answer_sentence)[1]
            rests = [float((a_vec @ self.aligner.tokens(s.text)[1].T).max(1).mean()) if len(a_vec) else 0.0
                     for s in premise]
            conflict = premise[int(np.argmax(rests))]
        return dspy.Prediction(verdict=verdict, probability=round(unsupported, 4),
                               kind=(label if label in CONFLICT_KINDS else "other") if flagged else None,
                               conflict_id=conflict.id if conflict else None,
                               conflict_text=conflict.text if conflict else None)

    # --- fitting --------------------------------------------------------------------------------------------------
    def training_pairs(self, trainset: Sequence[dspy.Example]) -> list[Pair]:
        keyed = [ex for ex in trainset if getattr(ex, "key", None) is not None]
        cases, key = [ex.case for ex in keyed], {ex.case.case_id: ex.key for ex in keyed}
        return training_pairs(cases, key, seed=self.seed, rounds=self.rounds) + \
            note_pairs(cases, seed=self.seed, per_case=self.note_pairs_per_case)

    @staticmethod
    def reference_pairs(examples: Sequence[dspy.Example]) -> tuple[list[list[str]], list[str]]:
        """Every reference answer sentence of `examples` with the note sentences it cites."""
        found = [pair for ex in examples if getattr(ex, "key", None) is not None
                 for pair in cited_answers(ex.case, ex.key)]
        return [cited for _, cited in found], [text for text, _ in found]

    def preflight(self, trainset: Sequence[dspy.Example]) -> None:
        """What fit needs of `trainset` (cases with a key), checked before the compile's scoring."""
        if not any(getattr(ex, "key", None) is not None for ex in trainset):
            raise ConfigError(NO_TRAINING_PAIRS)

    def fit(self, trainset: Sequence[dspy.Example], valset: Sequence[dspy.Example],
            log: Callable[[str], None] = print) -> dict[str, Any]:
        """Fit the head on `trainset`'s pairs, choose the threshold on `valset`'s reference answers and check that
        it flags more of `valset`'s built-in fabrications than of its correct sentences (`refused` says why not);
        returns what it measured, also kept in the weights' `fit`."""
        from sklearn.linear_model import LogisticRegression

        started = time.time()
        pairs = self.training_pairs(trainset)
        if not pairs:
            raise ConfigError(NO_TRAINING_PAIRS)
        log(f"verifier: {len(pairs)} training pairs from {len({p.case_id for p in pairs})} cases")
        x = np.array([self.aligner.features(p.hypothesis, p.premise) for p in pairs])
        y = np.array([p.label for p in pairs])
        mean, scale = standardisation(x)
        head = LogisticRegression(C=self.regularization, max_iter=3000, class_weight="balanced")
        head.fit((x - mean) / scale, y)
        coef, intercept = np.zeros((len(LABELS), x.shape[1])), np.full(len(LABELS), -30.0)
        coef[head.classes_], intercept[head.classes_] = head.coef_, head.intercept_  # a label without pairs: never
        names = feature_names(self.aligner.dim)
        fit: dict[str, Any] = {"pairs": len(pairs), "training_cases": len({p.case_id for p in pairs}),
                               "pairs_per_label": {label: int((y == i).sum()) for i, label in enumerate(LABELS)},
                               "training_accuracy": round(float((head.predict((x - mean) / scale) == y).mean()), 4),
                               "regularization": self.regularization, "rounds": self.rounds,
                               "note_pairs_per_case": self.note_pairs_per_case, "seed": self.seed}
        self.weights.set(names, self.aligner.model_name, mean, scale, coef, intercept, 0.5, fit)
        premises, hypotheses = self.reference_pairs(valset)
        supported = 1.0 - self.probabilities(premises, hypotheses)[:, 0] if hypotheses else np.zeros(0)
        threshold = flag_threshold(supported, self.max_false_flags)
        made = fabricated_pairs(valset, self.seed)
        scores = 1.0 - self.probabilities([p for p, _ in made], [h for _, h in made])[:, 0] if made else np.zeros(0)
        fit.update({"validation_reference_sentences": len(supported), "max_false_flags": self.max_false_flags,
                    "validation_false_flags": round(float((supported >= threshold).mean()), 4) if len(supported) else None,
                    "validation_fabricated": len(scores),
                    "validation_recall": round(float((scores >= threshold).mean()), 4) if len(scores) else None,
                    "seconds": round(time.time() - started, 1)})
        self.weights.set(names, self.aligner.model_name, mean, scale, coef, intercept, threshold, fit)
        log(f"verifier: threshold {threshold:.3f}; validation false flags {fit['validation_false_flags']} of "
            f"{len(supported)} reference sentences, recall {fit['validation_recall']} of {len(scores)} fabricated")
        refuse_chance(fit)
        return fit


def check_flag_settings(threshold: float | None, max_false_flags: float) -> None:
    """The two settings every verifier flags by: a threshold in (0, 1] or null (the fitted one), and the share of
    validation reference sentences the fitted threshold may flag, in [0, 1)."""
    if threshold is not None and not 0.0 < float(threshold) <= 1.0:
        raise ConfigError(f"program.grounding.verifier.threshold must be in (0, 1] or null, not {threshold!r}")
    if not 0.0 <= float(max_false_flags) < 1.0:
        raise ConfigError(f"program.grounding.verifier.max_false_flags must be in [0, 1), not {max_false_flags!r}")


def refuse_chance(fit: dict[str, Any]) -> None:
    """Mark a fit `refused` when it flags no more of the validation fabrications than of the correct sentences (both
    measured): the optimizer's review then leaves the saved program as it was."""
    recall, false_flags = fit.get("validation_recall"), fit.get("validation_false_flags")
    if recall is not None and false_flags is not None and recall <= false_flags:
        fit["refused"] = (f"it flags {recall:.0%} of the validation fabrications and {false_flags:.0%} of the correct "
                          "sentences (no better than chance)")


def fabricated_pairs(examples: Sequence[dspy.Example], seed: int) -> list[tuple[list[str], str]]:
    """The built-in fabrications of `tasks/archehr/fabrications.fabricate` for each validation case, citing an
    essential sentence (a sanity check of recall, not the benchmark: that is benchmarks/grounding_eval.py)."""
    from tasks.archehr.fabrications import fabricate

    rng, out = random.Random(seed), []
    for ex in examples:
        if getattr(ex, "key", None) is None or not ex.case.sentences:
            continue
        by_id = {s.id: s.text for s in ex.case.sentences}
        essential = sorted(ex.key.essential) or [ex.case.sentences[0].id]
        for text in fabricate(ex.case, rng):
            out.append(([by_id[rng.choice(essential)]], text))
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
