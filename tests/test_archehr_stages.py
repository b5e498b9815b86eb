"""Each stage with a scripted DummyLM: exact outputs, and every fallback branch."""

import dspy
import pytest

from tasks.archehr.data import AnswerSentence, NoteSentence
from tests.builders import archehr_stage

pytestmark = pytest.mark.unit

SENTS = [NoteSentence(str(i), f"sentence {i}.") for i in range(1, 6)]


def test_question_is_truncated_to_15_words(dummy_lm):
    dummy_lm([{"clinician_question": " ".join(f"w{i}" for i in range(20))}])
    out = archehr_stage("question", "lm")(patient_narrative="Why did I need surgery?")
    assert out.clinician_question == " ".join(f"w{i}" for i in range(15)) and out.fallback is None


def test_question_parse_failure_falls_back_to_the_patients_question(dummy_lm):
    dummy_lm([{"unrelated": "x"}, {"unrelated": "x"}])
    out = archehr_stage("question", "lm")(patient_narrative="I was sick. Why was the cath done? Thanks.")
    assert out.clinician_question == "Why was the cath done?"
    assert out.fallback.startswith("AdapterParseError")


def test_question_demos_are_in_the_prompt(dummy_lm):
    lm = dummy_lm([{"clinician_question": "Why?"}])
    demo = dspy.Example(patient_narrative="DEMO NARRATIVE", patient_question="(none)",
                        clinician_question="DEMO QUESTION").with_inputs("patient_narrative", "patient_question")
    archehr_stage("question", "lm", demos=[demo])(patient_narrative="x")
    prompt = "\n".join(m["content"] for m in lm.history[-1]["messages"])
    assert "DEMO NARRATIVE" in prompt and "DEMO QUESTION" in prompt


def test_evidence_strict_selection(dummy_lm):
    dummy_lm([{"scores": [5, 2, 4, 3, 1]}])
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.evidence_ids == ["1", "3"] and out.selection == "strict"
    assert out.scores == {"1": 5, "2": 2, "3": 4, "4": 3, "5": 1}


def test_evidence_lenient_when_nothing_scores_4(dummy_lm):
    dummy_lm([{"scores": [3, 2, 1, 3, 1]}])
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.evidence_ids == ["1", "4"] and out.selection == "lenient"


def test_evidence_first_n_when_nothing_scores_3(dummy_lm):
    dummy_lm([{"scores": [1, 2, 1, 2, 1]}])
    out = archehr_stage("evidence", "lm", "program.evidence.fallback_count=2")(
        clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.evidence_ids == ["1", "2"] and out.selection == "first_n"


def test_evidence_parse_failure_falls_back_to_first_3(dummy_lm):
    dummy_lm([{"scores": "not a list"}, {"scores": "not a list"}])
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.evidence_ids == ["1", "2", "3"] and out.selection == "fallback_first_n" and out.scores is None


def test_evidence_wrong_count_or_range_falls_back(dummy_lm):
    dummy_lm([{"scores": [5, 5]}, {"scores": [5, 9, 1, 1, 1]}])
    short = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert short.selection == "fallback_first_n" and "2 scores for 5 sentences" in short.fallback
    bad = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert bad.selection == "fallback_first_n" and "outside 1-5" in bad.fallback


def test_answer_soft_cut_and_extractive_fallback(dummy_lm):
    long = ("The stent was placed. " * 20).strip()
    dummy_lm([{"answer": long}, {"nope": 1}, {"nope": 1}])
    gen = archehr_stage("answer", "lm")
    out = gen(clinician_question="q", evidence=SENTS[:2], note_excerpt="note")
    assert len(out.answer.split()) <= 75 and out.answer.endswith(".") and out.fallback is None
    fb = gen(clinician_question="q", evidence=SENTS[:2], note_excerpt="note")
    assert fb.answer == "sentence 1. sentence 2." and fb.fallback


def test_alignment_drops_and_counts_unknown_ids(dummy_lm):
    dummy_lm([{"citations": [["1", "99", "1"], [], ["[4]"]]}])
    answers = [AnswerSentence("1", "a"), AnswerSentence("2", "b"), AnswerSentence("3", "c")]
    out = archehr_stage("alignment", "lm")(answer_sentences=answers, sentences=SENTS)
    assert out.alignment == [{"answer_id": "1", "evidence_id": ["1"]}, {"answer_id": "2", "evidence_id": []},
                             {"answer_id": "3", "evidence_id": ["4"]}]
    assert out.dropped_ids == 1


def test_alignment_parse_failure_claims_no_support(dummy_lm):
    dummy_lm([{"citations": [["1"]]}])  # one list for two answer sentences
    answers = [AnswerSentence("1", "a"), AnswerSentence("2", "b")]
    out = archehr_stage("alignment", "lm")(answer_sentences=answers, sentences=SENTS)
    assert out.alignment == [{"answer_id": "1", "evidence_id": []}, {"answer_id": "2", "evidence_id": []}]
    assert "1 citation lists for 2 answer sentences" in out.fallback


def test_a_list_where_text_is_expected_is_a_parse_failure_not_text(dummy_lm):
    dummy_lm([{"clinician_question": ["Why", "surgery?"]}])
    out = archehr_stage("question", "lm")(patient_narrative="Why did I need surgery?")
    assert out.clinician_question == "Why did I need surgery?"  # the documented fallback, not "['Why', 'surgery?']"
    assert out.fallback.startswith("AdapterParseError: field clinician_question must be a string")
