"""The LM judge of the grounding check: the perturbations and sentences it trains on, its compile through a DSPy
teleprompter against the flag decision (adopted only when validation improves), the reader verifier as its first
pass, and its settings refused in one line."""

from __future__ import annotations

import functools
import random

import dspy
import numpy as np
import pytest

from common.errors import ConfigError
from programs.archehr.grounding.judge import GroundingJudge, changed_words, sentence_examples
from programs.archehr.grounding.perturb import CONFLICT_KINDS, perturb
from programs.archehr.grounding.reader_verifier import ReaderVerifier, flag_threshold
from programs.archehr.grounding.verdicts import SUPPORTED
from tests.builders import grounding_check, keyed_examples

pytestmark = pytest.mark.unit
SUPPORTED_REPLY = {"verdict": "supported", "kind": "none", "conflicting_words": ""}
FLAG_REPLY = {"verdict": "contradicted", "kind": "side/site", "conflicting_words": "left"}
SMOLLM2 = "program.grounding.verifier.reader.model=smollm2"


def test_each_perturbation_changes_one_fact_and_keeps_the_rest():
    rng = random.Random(0)
    sentence = "Her left kidney function improved before discharge, and she was not given 40 mg of furosemide."
    changed = {kind: perturb(sentence, kind, rng, ["the scan was delayed because the machine was down."])
               for kind in CONFLICT_KINDS}
    assert all(c and c != sentence for c in changed.values()), changed
    assert "right kidney" in changed["side/site"] or "upper" in changed["side/site"] or "liver" in changed["side/site"]
    for kind, text in changed.items():  # most words kept: only the fact differs
        kept = set(sentence.lower().split()) & set(text.lower().split())
        assert len(kept) >= len(sentence.split()) - 5, (kind, text)
    assert perturb("Discharged home.", "side/site", rng, []) is None  # nothing to change: no pair


def test_flag_threshold_keeps_false_flags_within_budget():
    scores = np.linspace(0.0, 0.99, 100)
    t = flag_threshold(scores, 0.05)
    assert (scores >= t).sum() == 5
    assert flag_threshold(np.zeros(0), 0.05) == 0.5
    assert (scores >= flag_threshold(scores, 0.0)).sum() == 0



def test_the_judges_sentences_are_half_supported_and_half_misstating_their_note():
    train = sentence_examples(keyed_examples("realistic_cases_a", 4), seed=0, limit=10)
    assert len(train) == 10 and sum(ex.verdict == SUPPORTED for ex in train) == 5
    for ex in train:
        assert ex.note_sentences.startswith("[") and set(ex.inputs().keys()) == {"answer_sentence", "note_sentences"}
        if ex.verdict != SUPPORTED:
            assert ex.kind != "none" and ex.conflicting_words  # the changed words are the label's span
    val = sentence_examples(keyed_examples("bundled_cases", 2), seed=1, limit=6, perturbed=False)
    assert sum(ex.verdict == SUPPORTED for ex in val) == 3 and len(val) == 6
    assert changed_words("The left kidney was removed.", "The right kidney was removed.") == "right"
    assert changed_words("He did not have fever.", "He did have fever.") == "did"


def _judge_replies(val: list[dspy.Example], right: bool) -> list[dict]:
    return [(FLAG_REPLY if (ex.verdict != SUPPORTED) == right else SUPPORTED_REPLY) for ex in val]


@pytest.mark.parametrize("improves", [True, False])
def test_compile_adopts_the_teleprompters_demos_only_when_validation_improves(dummy_lm, improves):
    trainset, valset = keyed_examples("realistic_cases_a", 3), keyed_examples("bundled_cases", 2)
    judge = GroundingJudge(teleprompter=functools.partial(dspy.LabeledFewShot, k=2), train_examples=4,
                           val_examples=4)
    val = sentence_examples(valset, judge.seed + 1, 4, perturbed=False)
    before, after = _judge_replies(val, right=not improves), _judge_replies(val, right=improves)
    dummy_lm(before + after)
    fit = judge.fit(trainset, valset, log=lambda _: None)
    assert fit["teleprompter"] == "LabeledFewShot" and fit["training_sentences"] == 4
    if improves:
        assert fit["before"]["recall"] == 0.0 and fit["after"] == {"recall": 1.0, "false_flags": 0.0,
                                                                   "failed_replies": 0}
        assert "refused" not in fit and len(judge.predict.demos) == 2
        assert {"verdict", "kind", "conflicting_words"} <= set(judge.predict.demos[0].keys())
    else:
        assert fit["refused"].startswith("the compiled judge separates the validation sentences worse")
        assert judge.predict.demos == []  # the judge is left as it started


def test_a_verdict_outside_the_three_is_a_stage_output_error_a_run_records(monkeypatch):
    from common.failures import RECOVERABLE

    judge = GroundingJudge()
    monkeypatch.setattr(judge, "predict", lambda **_: dspy.Prediction(verdict="maybe", kind="none",
                                                                     conflicting_words=""))
    with pytest.raises(RECOVERABLE, match="the judge answered 'maybe'"):
        judge(answer_sentence="x", note_sentences="[1] y")


def test_a_compiled_judge_no_better_than_chance_is_refused(dummy_lm):
    judge = GroundingJudge(teleprompter=functools.partial(dspy.LabeledFewShot, k=2), train_examples=4,
                           val_examples=4)
    dummy_lm([FLAG_REPLY] * 8)  # flags everything, before and after: recall 1, false flags 1
    fit = judge.fit(keyed_examples("realistic_cases_a", 3), keyed_examples("bundled_cases", 2), log=lambda _: None)
    assert "no better than chance" in fit["refused"] and judge.predict.demos == []


def test_compile_needs_an_lm():
    with pytest.raises(ConfigError, match="compiling the LM judge needs an LM"):
        GroundingJudge().fit(keyed_examples("realistic_cases_a", 1), [])


NOTE_ANSWER = [{"id": "1", "text": "A 64-year-old man was admitted with chest pain."},  # plain: verifier's call
               {"id": "2", "text": "His troponin was 47.3 on arrival."}]  # a number the note lacks: the rules flag


class ReaderStandIn:
    """A reader for wiring tests: every claim reads as the same vector (the verifier's head then gives P = 0.5)."""

    name, dim = "stand-in", 4

    def read_claims(self, notes: list[list[str]], claims: list[str]) -> np.ndarray:
        return np.ones((len(claims), self.dim))


def _calls(dummy_lm, *overrides: str) -> int:
    from tasks.archehr.data import NoteSentence

    note = [NoteSentence("1", "64M admitted with substernal chest pain."), NoteSentence("2", "Troponin was negative.")]
    lm = dummy_lm([SUPPORTED_REPLY] * 4)
    check = grounding_check("reader", SMOLLM2, "program.grounding.judge=lm", *overrides)
    check.verifier = ReaderVerifier(ReaderStandIn(), threshold=0.9)
    check.verifier.weights.set(np.zeros(4), np.ones(4), np.zeros(4), 0.0, {"threshold": 0.9})
    links = [{"answer_id": "1", "evidence_id": ["1"]}, {"answer_id": "2", "evidence_id": ["2"]}]
    verdicts = check(NOTE_ANSWER, links, note).verdicts
    asked = [v for v in verdicts if "judge" in v]
    assert len(asked) == len(lm.history)
    return len(lm.history)


def test_the_verifier_is_the_judges_first_pass(dummy_lm):
    assert _calls(dummy_lm) == 2  # judge_from 0: every sentence
    assert _calls(dummy_lm, "program.grounding.judge_from=1.0") == 1  # only the one the rules flag


@pytest.mark.parametrize(("override", "message"), [
    ("program.grounding.judge_from=0.5", "judge_from gates the LM judge: set program.grounding.judge=lm too"),
    ("program.grounding.judge_from=2", "judge_from must be a number in [0, 1]"),
    ("+program.grounding.judge_compile.epochs=3", "judge_compile: got an unexpected keyword argument 'epochs'"),
    ("program.grounding.judge_compile.train_examples=1", "train_examples and val_examples must be >= 2"),
])
def test_the_judges_settings_are_refused_in_one_line(override, message):
    overrides = [override] + (["program.grounding.judge=lm"] if "judge_from=2" in override or "compile" in override
                              else [])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        grounding_check("reader", SMOLLM2, *overrides)
    assert "\n" not in str(err.value)


def test_experiment_compile_judge_fits_the_judge_alone_on_the_realistic_cases():
    from common.config_groups import compose_config
    from optimizers.fit_learned import learned_parts
    from runners.program import contract_for

    cfg = compose_config("program=archehr", "task=compile", "experiment=compile_judge")
    assert cfg.optimizer.teleprompter.only == ["_grounding.judge"] and cfg.program.grounding.judge == "lm"
    assert "grounding" in contract_for(cfg).lm_roles(cfg) and cfg.lm.client.model == "smollm2-135m-instruct"
    assert [p.split("/")[-1] for p in cfg.data.train] == ["realistic_cases_a.xml", "realistic_cases_b.xml"]
    holder = dspy.Module()
    holder._grounding = grounding_check("claims", "program.grounding.judge=lm")
    assert {n for n, _ in learned_parts(holder)} == {"_grounding.judge"}
