"""The non-LLM stages on small hand-made notes: exact outputs, and the LM stages falling back to them."""

import dspy
import pytest

from programs.archehr.evidence.embedding import to_likert
from tasks.archehr.data import AnswerSentence, Case, NoteSentence
from tests.builders import archehr_stage, program

pytestmark = pytest.mark.unit

NOTE = [
    NoteSentence("1", "DISCHARGE SUMMARY:"),
    NoteSentence("2", "Lisinopril was held because of hypotension and acute kidney injury."),
    NoteSentence("3", "She enjoys gardening and lives with her daughter."),
    NoteSentence("4", "Her creatinine improved to 1.1 by discharge."),
]


def test_the_baseline_question_stage_quotes_the_first_question_sentence_within_the_limit():
    baseline = archehr_stage("question", "baseline")
    out = baseline(patient_narrative="My dad had surgery. Why did they operate on my dad? Thanks.")
    assert out.clinician_question == "Why did they operate on my dad?"
    assert len(baseline(patient_narrative="Why " + "very " * 30 + "long?").clinician_question.split()) <= 15


def test_likert_mapping_of_relative_similarity():
    cuts = (0.5, 0.7, 0.8, 0.95)
    assert [to_likert(x, cuts) for x in (0.2, 0.5, 0.7, 0.8, 0.95, 1.0)] == [1, 2, 3, 4, 5, 5]


def test_embedding_evidence_selects_the_answering_sentence_and_never_the_header():
    seed_rule = archehr_stage("evidence", "embedding_likert")
    out = seed_rule(clinician_question="Why was lisinopril stopped during the admission?", patient_narrative="", sentences=NOTE)
    assert out.evidence_ids == ["2"] and out.selection == "strict"
    # the default is recall-first: the top 60% of the 3 non-header sentences (2), in note order
    recall_first = archehr_stage("evidence", "embedding")(clinician_question="Why was lisinopril stopped?",
                                                          patient_narrative="", sentences=NOTE)
    assert recall_first.evidence_ids == ["2", "4"] and recall_first.selection == "top_share"
    assert out.scores["1"] == 1 and out.scores["2"] == 5 and out.scores["3"] <= 2


def test_evidence_rule_of_the_seed_applies_unchanged_to_similarity_scores():
    # cut points nothing reaches: every sentence scores 1 -> the first-3 fallback, as with the LM scorer
    scorer = archehr_stage("evidence", "embedding_likert", "program.evidence.cuts=[9,9,9,9]")
    out = scorer(clinician_question="q", patient_narrative="", sentences=NOTE)
    assert out.evidence_ids == ["1", "2", "3"] and out.selection == "first_n"


def test_extractive_answer_drops_headers_and_ends_sentences():
    evidence = [NOTE[0], NOTE[1], NoteSentence("9", "Restart planned at follow-up")]
    out = archehr_stage("answer", "extractive")(clinician_question="q", evidence=evidence, note_excerpt="")
    assert out.answer == ("Lisinopril was held because of hypotension and acute kidney injury. "
                          "Restart planned at follow-up.")
    in_order = archehr_stage("answer", "extractive", "program.answer.max_words=10", "program.answer.choose=note_order")
    long = in_order(clinician_question="q", evidence=[NOTE[1], NOTE[3]], note_excerpt="")
    assert long.answer == "Lisinopril was held because of hypotension and acute kidney injury."


def test_over_the_limit_without_scores_the_default_answer_keeps_the_whole_sentences_closest_to_the_question():
    evidence = [NoteSentence("1", "He presented with two days of crushing chest pain radiating to the left arm."),
                NoteSentence("2", "The ECG showed ST elevation in the anterior leads and troponin was elevated."),
                NoteSentence("3", "A drug-eluting stent was placed in the proximal left anterior descending artery."),
                NoteSentence("4", "Aspirin and ticagrelor are required for twelve months to prevent stent thrombosis.")]
    answer = archehr_stage("answer", "extractive", "program.answer.max_words=30")
    out = answer(clinician_question="Why does he need two blood thinners after the stent?", evidence=evidence,
                 note_excerpt="")
    assert out.answer.startswith(evidence[2].text) and out.answer.endswith(evidence[3].text)  # note order kept
    assert len(out.answer.split()) <= 30 and evidence[0].text not in out.answer
    in_order = archehr_stage("answer", "extractive", "program.answer.max_words=30", "program.answer.choose=note_order")
    cut = in_order(clinician_question="Why does he need two blood thinners after the stent?", evidence=evidence,
                   note_excerpt="")
    assert cut.answer.startswith(evidence[0].text) and evidence[3].text not in cut.answer


def test_choose_evidence_ranks_by_the_evidence_stages_scores_then_by_the_question():
    evidence = [NoteSentence("1", "He presented with two days of crushing chest pain radiating to the left arm."),
                NoteSentence("2", "The ECG showed ST elevation in the anterior leads and troponin was elevated."),
                NoteSentence("3", "A drug-eluting stent was placed in the proximal left anterior descending artery."),
                NoteSentence("4", "Aspirin and ticagrelor are required for twelve months to prevent stent thrombosis.")]
    question = "Why does he need two blood thinners after the stent?"
    answer = archehr_stage("answer", "extractive", "program.answer.max_words=30", "program.answer.choose=evidence")
    # the evidence stage scored the presentation and the ECG highest: they are kept, in note order
    ranked = answer(clinician_question=question, evidence=evidence, note_excerpt="",
                    scores={"1": 5, "2": 5, "3": 4, "4": 4}).answer
    assert ranked == f"{evidence[0].text} {evidence[1].text}"
    # equal scores (or none given): the question decides, as with choose=question
    by_question = archehr_stage("answer", "extractive", "program.answer.max_words=30")(
        clinician_question=question, evidence=evidence, note_excerpt="").answer
    assert answer(clinician_question=question, evidence=evidence, note_excerpt="").answer == by_question
    assert answer(clinician_question=question, evidence=evidence, note_excerpt="",
                  scores=dict.fromkeys("1234", 4)).answer == by_question


def test_the_soft_cut_ratio_acts_on_a_sentence_over_the_limit_in_either_mode():
    long_one = [NoteSentence("1", "He was treated with intravenous ampicillin and ceftriaxone. " + "word " * 20 + "end.")]
    for choose in ("question", "note_order"):
        low = archehr_stage("answer", "extractive", "program.answer.max_words=12", f"program.answer.choose={choose}")
        high = archehr_stage("answer", "extractive", "program.answer.max_words=12", f"program.answer.choose={choose}",
                             "program.answer.soft_cut_ratio=0.95")
        a = low(clinician_question="which antibiotics?", evidence=long_one, note_excerpt="").answer
        b = high(clinician_question="which antibiotics?", evidence=long_one, note_excerpt="").answer
        assert a == "He was treated with intravenous ampicillin and ceftriaxone." and b != a, (choose, a, b)


def test_similarity_alignment_is_conservative_and_many_to_many():
    answers = [AnswerSentence("1", "Lisinopril was held because of low blood pressure and kidney injury."),
               AnswerSentence("2", "The weather was sunny.")]
    aligner = archehr_stage("alignment", "similarity", "program.alignment.threshold=0.6")
    out = aligner(answer_sentences=answers, sentences=NOTE)
    assert out.alignment == [{"answer_id": "1", "evidence_id": ["2"]}, {"answer_id": "2", "evidence_id": []}]


def test_the_no_lm_cascade_needs_no_lm():
    case = Case("7", "I had pneumonia. Why was my lisinopril stopped?", sentences=tuple(NOTE),
                answer_sentences=(AnswerSentence("1", "Lisinopril was held because of hypotension."),))
    dspy.configure(lm=None)
    cascade = program("archehr", "lm=none")  # no LM: every stage's non-LLM implementation
    pred = cascade(case=case)
    question = pred.clinician_question  # the learned question stage: one short question naming the drug
    assert "lisinopril" in question.lower() and question.endswith("?") and len(question.split()) <= 15
    assert pred.evidence_ids[0] == "2" and "1" not in pred.evidence_ids and pred.selection == "learned"
    assert pred.alignment == [{"answer_id": "1", "evidence_id": ["2"]}]
    assert all(u["lm_calls"] == 0 for u in pred.usage.values())


def test_failed_lm_stage_falls_back_to_its_no_lm_module(dummy_lm):
    case = Case("7", "Why was my lisinopril stopped?", sentences=tuple(NOTE))
    dummy_lm([{"clinician_question": "Why was lisinopril held?"}, {"scores": "garbage"},
              {"answer": "Lisinopril was held for hypotension."}, {"citations": [["2"]]}])
    pred = program("archehr", "stages=lm", "program/archehr/fallback=no_lm")(case=case)
    assert pred.fallbacks["evidence"].endswith("-> no-LM stage") and pred.selection == "top_share"
    assert pred.evidence_ids == ["2", "4"]  # the embedding scorer's choice, not the first 3 sentences


def test_unknown_stage_implementation_is_refused_with_the_choices():
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match=r"(?s)Could not find 'program/archehr/evidence/bm25'.*embedding"):
        program("archehr", "program/archehr/evidence=bm25")
    with pytest.raises(MissingConfigException, match=r"program/archehr/fallback/nope"):
        program("archehr", "program/archehr/fallback=nope")


def test_no_lm_stages_share_one_embedder_and_hold_no_predictor():
    cascade = program("archehr", "stages=lm", "program/archehr/evidence=embedding",
                      "program/archehr/alignment=similarity", "program/archehr/fallback=no_lm")
    assert cascade.evidence.embedder is cascade.alignment.embedder
    # the embedding scorer selects with a pure function: no never-called predictor in the learnable state
    assert [name for name, _ in cascade.named_predictors()] == ["question.interpret", "answer.generate"]
    # a no-LM fallback only where a stage calls an LM, sharing the same embedder
    assert sorted(cascade._no_lm) == ["answer", "question"]
    lm_evidence = program("archehr", "stages=lm", "program/archehr/alignment=similarity",
                          "program/archehr/fallback=no_lm")
    assert lm_evidence._no_lm["evidence"].embedder is lm_evidence.alignment.embedder
    assert sorted(lm_evidence._no_lm) == ["answer", "evidence", "question"]


@pytest.mark.parametrize(("choice", "override"), [("extractive", "program.answer.max_words=0"),
                                                  ("extractive", "program.answer.max_words=-5"),
                                                  ("lm", "program.answer.max_words=abc"),
                                                  ("extractive", "program.answer.soft_cut_ratio=2")])
def test_an_answer_limit_that_cannot_work_is_one_config_line(choice, override):
    from common.errors import ConfigError

    with pytest.raises(ConfigError, match=override.split("=")[0].replace(".", r"\.") + " must be"):
        archehr_stage("answer", choice, override)
