"""The whole cascade with DummyLMs: wiring, 4 LM calls per case, per-role LMs, Subtask-4 input answers."""

import dspy
import pytest

from tasks.archehr.data import AnswerSentence
from tests.builders import program

pytestmark = pytest.mark.unit


def script(case):
    n = len(case.sentences)
    scores = [1] * n
    scores[3] = 5  # sentence id "4"
    return [
        {"clinician_question": "Why was catheterization performed?"},
        {"scores": scores},
        {"answer": "Troponin rose. ECG changed."},
        {"citations": [["4"], ["5"]]},
    ]


def test_cascade_runs_four_stages_with_one_call_each(dummy_lm, bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=())  # no reference answer: align our own answer
    dummy_lm(script(case))
    pred = program("archehr")(case=case)
    assert pred.clinician_question == "Why was catheterization performed?"
    assert pred.evidence_ids == ["4"] and pred.selection == "strict"
    assert pred.answer == "Troponin rose. ECG changed."
    assert pred.alignment == [{"answer_id": "1", "evidence_id": ["4"]}, {"answer_id": "2", "evidence_id": ["5"]}]
    assert pred.fallbacks == {} and pred.alignment_source == "generated"
    assert {k: v["lm_calls"] for k, v in pred.usage.items()} == {"question": 1, "evidence": 1, "answer": 1,
                                                                  "alignment": 1, "grounding": 0}


def test_reference_answer_sentences_are_aligned_when_given(dummy_lm, bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=(AnswerSentence("7", "ref one."), AnswerSentence("8", "two.")))
    dummy_lm(script(case))
    pred = program("archehr")(case=case)
    assert [a["answer_id"] for a in pred.alignment] == ["7", "8"] and pred.alignment_source == "reference"


def test_raw_narrative_anchor_is_sent_to_the_evidence_scorer(dummy_lm, bundled_cases):
    case = bundled_cases[0]
    lm = dummy_lm(script(case))
    program("archehr", "program.evidence.anchor=patient_narrative")(case=case)
    evidence_prompt = lm.history[1]["messages"][-1]["content"]
    assert "My mother went to the ER" in evidence_prompt


def test_one_lm_per_role(dummy_lm, bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=())
    answers = script(case)
    default = dummy_lm(answers[:3])
    aligner = dspy.utils.DummyLM([answers[3]], adapter=dspy.JSONAdapter())
    pred = program("archehr", role_lms={"alignment": aligner})(case=case)
    assert len(default.history) == 3 and len(aligner.history) == 1
    assert pred.alignment[0]["evidence_id"] == ["4"]


def test_case_without_note_gets_subtask1_only(dummy_lm):
    from tasks.archehr.data import Case

    dummy_lm([{"clinician_question": "Why?"}])
    pred = program("archehr")(case=Case("121", "Why did they operate?"))
    assert pred.clinician_question == "Why?" and pred.answer is None and pred.selection == "no_note"


class _RecordingAnswer(dspy.Module):
    """An answer stage a user writes: `forward` with or without the optional `scores` input."""

    uses_lm, max_words, soft_cut_ratio = False, 75, 0.6

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, clinician_question, evidence, note_excerpt):
        self.seen.append(None)
        return dspy.Prediction(answer="Troponin rose.", fallback=None)


class _ScoresAnswer(_RecordingAnswer):
    def forward(self, clinician_question, evidence, note_excerpt, scores=None):
        self.seen.append(scores)
        return dspy.Prediction(answer="Troponin rose.", fallback=None)


def test_the_evidence_scores_reach_an_answer_stage_that_takes_them_and_one_without_still_runs(dummy_lm,
                                                                                             bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=())
    for stage, expected in ((_ScoresAnswer(), "scores"), (_RecordingAnswer(), None)):
        dummy_lm(script(case))
        cascade = program("archehr")
        cascade.answer = stage
        pred = cascade(case=case)
        assert pred.answer == "Troponin rose." and pred.evidence_ids == ["4"]
        if expected:
            assert stage.seen == [pred.scores] and stage.seen[0]["4"] == 5
        else:
            assert stage.seen == [None]
