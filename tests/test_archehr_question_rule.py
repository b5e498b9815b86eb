"""The rule question stage (Subtask 1 without an LM) on patient messages written for these tests, in the shapes real
messages take: a relative writing, thanks and sign-offs after the question, no question at all, a long question,
an opinion-only question, a vague 'this'. None of these texts is in the data sets the rules were written from."""

import re

import dspy
import pytest

from programs.archehr.offline.question import RuleQuestionInterpreter


@pytest.fixture(scope="module")
def stage() -> RuleQuestionInterpreter:
    return RuleQuestionInterpreter(max_words=15)


def ask(stage: RuleQuestionInterpreter, narrative: str, marked: str = "") -> str:
    out = stage(patient_narrative=narrative, patient_question=marked)
    assert isinstance(out, dspy.Prediction) and out.fallback is None
    question = out.clinician_question
    assert question.endswith("?") and len(question.split()) <= 15, question
    return question


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def test_a_relative_writing_makes_the_relative_the_subject(stage):
    q = ask(stage, "My 67 year old father was admitted with pneumonia last week. Now he keeps coughing at night. "
                   "Why is my father still coughing after the antibiotics?")
    assert q.startswith("Why is he still coughing")
    assert not words(q) & {"my", "i", "father", "me"}
    q = ask(stage, "Hi, I am writing about my wife who had a stroke in May. Will my wife be able to walk again? "
                   "Thanks so much.")
    assert q.startswith("Will she be able to walk again")
    assert not words(q) & {"my", "i", "wife", "thanks"}


def test_the_writer_as_patient_becomes_the_patient_and_the_verb_agrees(stage):
    assert ask(stage, "I was told my potassium is high. Why did they stop my lisinopril?") == (
        "Why was the patient's lisinopril stopped?")
    assert ask(stage, "I am a 40 year old male. Do I need to keep taking the blood thinner?").startswith(
        "Does he need to keep taking the blood thinner")


def test_thanks_greetings_and_sign_offs_after_the_question_are_never_the_question(stage):
    q = ask(stage, "Hello doctor. My mother has had a fever and chills since her surgery on Monday. Should she go "
                   "back to the hospital? Thank you so much for your help! God bless. Regards, Ann")
    assert q.startswith("Should she go back to the hospital")
    assert not words(q) & {"thank", "thanks", "bless", "regards", "hello", "ann"}


def test_a_message_without_a_question_gets_one_about_its_clinical_focus(stage):
    q = ask(stage, "My husband was in the ICU for five days with sepsis. Since coming home he has terrible "
                   "headaches and dizziness every morning.")
    assert q.startswith("What is causing his")
    assert {"headaches", "dizziness"} <= words(q)


def test_an_opinion_only_question_is_replaced_by_one_about_the_complaint(stage):
    q = ask(stage, "My son is 8 and has had a rash on his arms and a high fever for three days. The ER said it's "
                   "viral. What do you think?")
    assert "think" not in words(q) and "rash" in words(q) and " his " in f" {q} "
    q = ask(stage, "My sister has had black stools and stomach cramps since she started the new pills. What would "
                   "you recommend?")
    assert "recommend" not in words(q) and words(q) & {"stools", "cramps"}


def test_a_long_question_is_shortened_by_dropping_words_not_cut(stage):
    q = ask(stage, "I had knee replacement surgery three weeks ago. My question is whether the swelling in my knee, "
                   "which gets worse every evening when I have been walking around the house for more than an "
                   "hour, is normal at this stage of recovery?")
    assert q == "Is the swelling in the patient's knee normal at this stage of recovery?"


def test_a_run_on_message_without_stops_still_gives_a_whole_question(stage):
    q = ask(stage, "my grandma fell and broke her hip and now she is confused and doesnt know us and the doctors "
                   "say its delirium but we are so scared is this going to be permanent or will she get better "
                   "please help us we dont know what to do")
    assert not re.search(r"\b(?:the|a|and|or|of|to|her|his|if)\?$", q)
    assert words(q) & {"confusion", "delirium", "confused"}


def test_vague_this_is_filled_with_what_the_message_named(stage):
    q = ask(stage, "My dad has had a cough with blood for a month and lost 20 pounds. Could this be lung cancer?")
    assert q == "Could his cough with blood be lung cancer?"


def test_questions_about_what_the_team_did_are_asked_in_the_passive(stage):
    q = ask(stage, "My wife has heart failure. They gave her furosemide in the ER. Why did they double her "
                   "furosemide at discharge?")
    assert q.startswith("Why was her furosemide doubled")


@pytest.mark.parametrize("narrative", ["", "(none)", "Thanks!", "HELLO DOCTOR!!!", "12 13 14", "???",
                                       "word " * 200, "Why " + "very " * 40 + "long?"])
def test_any_input_gives_one_short_question_mark_question(stage, narrative):
    ask(stage, narrative)


def test_marked_phrases_are_used_when_the_case_has_them(stage):
    q = ask(stage, "I had chest pain and they did a catheterization. I feel fine now.",
            marked="Was the catheterization necessary?")
    assert q.startswith("Why was the catheterization needed")
    assert ask(stage, "My wife fell and hit her head. Will she recover?", marked="(none)").startswith("Will she")
