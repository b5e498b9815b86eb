"""The non-LLM stages on small hand-made notes: exact outputs, and the LM stages falling back to them."""

import dspy
import pytest

from programs.archehr import ArchEHRCascade
from programs.archehr.offline import EmbeddingEvidenceScorer, ExtractiveAnswer, RuleQuestionInterpreter, SimilarityAligner
from programs.archehr.offline.evidence import to_likert
from programs.archehr.offline.question import third_person
from tasks.archehr.data import AnswerSentence, Case, NoteSentence

NOTE = [
    NoteSentence("1", "DISCHARGE SUMMARY:"),
    NoteSentence("2", "Lisinopril was held because of hypotension and acute kidney injury."),
    NoteSentence("3", "She enjoys gardening and lives with her daughter."),
    NoteSentence("4", "Her creatinine improved to 1.1 by discharge."),
]


def test_rule_question_uses_the_marked_phrase_in_the_third_person():
    rule = RuleQuestionInterpreter()
    out = rule(patient_narrative="My dad had surgery. Why did they operate on my dad? Thanks.")
    assert out.clinician_question == "Why did they operate on the patient?"
    marked = rule(patient_narrative="long story", patient_question="I was told nothing. Why was I given lasix?")
    assert marked.clinician_question == "Why was the patient given lasix?"
    assert len(rule(patient_narrative="Why " + "very " * 30 + "long?").clinician_question.split()) == 15
    assert third_person("my mother's pills made me dizzy") == "The patient's pills made the patient dizzy"


def test_likert_mapping_of_relative_similarity():
    cuts = (0.5, 0.7, 0.8, 0.95)
    assert [to_likert(x, cuts) for x in (0.2, 0.5, 0.7, 0.8, 0.95, 1.0)] == [1, 2, 3, 4, 5, 5]


def test_embedding_evidence_selects_the_answering_sentence_and_never_the_header():
    out = EmbeddingEvidenceScorer()(clinician_question="Why was lisinopril stopped during the admission?", sentences=NOTE)
    assert out.evidence_ids == ["2"] and out.selection == "strict"
    assert out.scores["1"] == 1 and out.scores["2"] == 5 and out.scores["3"] <= 2


def test_evidence_rule_of_the_seed_applies_unchanged_to_similarity_scores():
    # cut points nothing reaches: every sentence scores 1 -> the first-3 fallback, as with the LM scorer
    out = EmbeddingEvidenceScorer(cuts=(9, 9, 9, 9))(clinician_question="q", sentences=NOTE)
    assert out.evidence_ids == ["1", "2", "3"] and out.selection == "first_n"


def test_extractive_answer_drops_headers_and_ends_sentences():
    evidence = [NOTE[0], NOTE[1], NoteSentence("9", "Restart planned at follow-up")]
    out = ExtractiveAnswer()(clinician_question="q", evidence=evidence, note_excerpt="")
    assert out.answer == ("Lisinopril was held because of hypotension and acute kidney injury. "
                          "Restart planned at follow-up.")
    long = ExtractiveAnswer(max_words=10)(clinician_question="q", evidence=[NOTE[1], NOTE[3]], note_excerpt="")
    assert long.answer == "Lisinopril was held because of hypotension and acute kidney injury."


def test_similarity_alignment_is_conservative_and_many_to_many():
    answers = [AnswerSentence("1", "Lisinopril was held because of low blood pressure and kidney injury."),
               AnswerSentence("2", "The weather was sunny.")]
    out = SimilarityAligner(threshold=0.6)(answer_sentences=answers, sentences=NOTE)
    assert out.alignment == [{"answer_id": "1", "evidence_id": ["2"]}, {"answer_id": "2", "evidence_id": []}]


def test_all_offline_cascade_needs_no_lm():
    case = Case("7", "I had pneumonia. Why was my lisinopril stopped?", sentences=tuple(NOTE),
                answer_sentences=(AnswerSentence("1", "Lisinopril was held because of hypotension."),))
    dspy.configure(lm=None)
    program = ArchEHRCascade(stages={"question": "rule", "evidence": "embedding", "answer": "extractive",
                                     "alignment": "similarity"})
    pred = program(case=case)
    assert pred.clinician_question == "Why was the patient's lisinopril stopped?"
    assert pred.evidence_ids == ["2"] and pred.alignment == [{"answer_id": "1", "evidence_id": ["2"]}]
    assert all(u["lm_calls"] == 0 for u in pred.usage.values())


def test_failed_lm_stage_falls_back_to_its_offline_module(dummy_lm):
    case = Case("7", "Why was my lisinopril stopped?", sentences=tuple(NOTE))
    dummy_lm([{"clinician_question": "Why was lisinopril held?"}, {"scores": "garbage"},
              {"answer": "Lisinopril was held for hypotension."}, {"citations": [["2"]]}])
    pred = ArchEHRCascade(fallback="offline")(case=case)
    assert pred.fallbacks["evidence"].endswith("-> offline stage") and pred.selection == "strict"
    assert pred.evidence_ids == ["2"]  # the embedding scorer's choice, not the first 3 sentences


def test_unknown_stage_kind_is_refused():
    with pytest.raises(ValueError, match=r"program.stages.evidence='bm25'"):
        ArchEHRCascade(stages={"evidence": "bm25"})
