"""The LM judge of the grounding check: its verdicts, the reader verifier as its first pass, and its settings refused
in one line."""

from __future__ import annotations

import dspy
import numpy as np
import pytest

from common.errors import ConfigError
from programs.archehr.grounding.judge import GroundingJudge
from programs.archehr.grounding.reader_verifier import ReaderVerifier, flag_threshold
from tests.builders import grounding_check

pytestmark = pytest.mark.unit
SUPPORTED_REPLY = {"verdict": "supported", "kind": "none", "conflicting_words": ""}
FLAG_REPLY = {"verdict": "contradicted", "kind": "side/site", "conflicting_words": "left"}
SMOLLM2 = "program.grounding.verifier.reader.model=smollm2"


def test_flag_threshold_keeps_false_flags_within_budget():
    scores = np.linspace(0.0, 0.99, 100)
    t = flag_threshold(scores, 0.05)
    assert (scores >= t).sum() == 5
    assert flag_threshold(np.zeros(0), 0.05) == 0.5
    assert (scores >= flag_threshold(scores, 0.0)).sum() == 0



def test_a_verdict_outside_the_three_is_a_stage_output_error_a_run_records(monkeypatch):
    from common.failures import RECOVERABLE

    judge = GroundingJudge()
    monkeypatch.setattr(judge, "predict", lambda **_: dspy.Prediction(verdict="maybe", kind="none",
                                                                     conflicting_words=""))
    with pytest.raises(RECOVERABLE, match="the judge answered 'maybe'"):
        judge(answer_sentence="x", note_sentences="[1] y")


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
])
def test_the_judges_settings_are_refused_in_one_line(override, message):
    overrides = [override] + (["program.grounding.judge=lm"] if "judge_from=2" in override else [])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        grounding_check("reader", SMOLLM2, *overrides)
    assert "\n" not in str(err.value)
