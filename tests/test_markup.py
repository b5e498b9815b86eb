"""strip_markup: what leaks out of an LM is removed, clinical text is untouched; the ArchEHR programs strip their
string outputs before the word limits and count each repair in the record and usage.json."""

from dataclasses import replace

import pytest

from common.markup import strip_markup, without_markup
from programs.archehr.contract import ArchEHRContract
from programs.archehr2025.contract import ArchEHR2025Contract
from tests.builders import archehr_stage, program
from tests.test_archehr_pipeline import script

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("raw", "clean"), [
    ('Why did he still need the surgery? ```json {"', "Why did he still need the surgery?"),  # seen in a run
    ("```\nThe stent was placed.\nHe recovered.\n```", "The stent was placed. He recovered."),
    ("```markdown\nThe stent was placed.\n```", "The stent was placed."),
    ('```json\n{"answer": "The stent was placed."}\n```', "The stent was placed."),  # the one string inside
    ("The stent was placed.```", "The stent was placed."),  # a dangling fence
    ("**Answer:** the patient had **severe** pain.", "Answer: the patient had severe pain."),
    ("### Why was the cath done?", "Why was the cath done?"),
    ("* Troponin rose.\n* ECG changed.", "Troponin rose. ECG changed."),
    ("<answer>Why was the <b>stent</b> placed?</answer>", "Why was the stent placed?"),
    ("Why was the stent placed?<|eot_id|>", "Why was the stent placed?"),
    ("<think>the narrative says...</think>Why was the stent placed?", "Why was the stent placed?"),
    ("*Why was the stent placed?*", "Why was the stent placed?"),
    ("Switch to `vancomycin`.", "Switch to vancomycin."),
])
def test_markup_is_stripped_and_reported(raw, clean):
    assert strip_markup(raw) == (clean, True)


@pytest.mark.parametrize("text", [
    "BP 120/80 mmHg, HR 72, SpO2 98% on RA.",
    "Give <5 mg/kg; keep K+ >3.5 and Na 135-145 mmol/L.",
    "pH 7.2, pCO2 60, HCO3- 24: respiratory acidosis.",
    "Dose 2*3*4 mg, HbA1c* (see note), p<0.05 and a <b and c> comparison.",
    "1. Troponin rose.\n2. The ECG showed ST depressions.\n3. A stent was placed.",
    "- aspirin 81 mg\n- clopidogrel 75 mg",
    "He is treated with vancomycin for MRSA (MIC <= 2).",
    "",
])
def test_clinical_text_is_not_repaired(text):
    clean, changed = strip_markup(text)
    assert not changed and clean == " ".join(text.split())  # whitespace is normalised, never counted as a repair


def test_without_markup_keeps_clean_text_byte_for_byte():
    assert without_markup("line one\n\n  line two ") == ("line one\n\n  line two ", False)  # prompts stay identical
    assert without_markup("**bold**\nthought") == ("bold thought", True)
    assert without_markup(None) == ("", False)


def test_question_stage_strips_before_the_word_limit(dummy_lm):
    words = " ".join(f"w{i}" for i in range(14))
    dummy_lm([{"clinician_question": f'{words} ```json {{"'}, {"clinician_question": '```json {"'},
              {"clinician_question": '```json {"'}])
    stage = archehr_stage("question", "lm")
    out = stage(patient_narrative="Why did I need surgery?")
    assert out.clinician_question == words and out.repairs == 1 and out.fallback is None  # 14 clean words, not 15
    only_markup = stage(patient_narrative="I was sick. Why was the cath done?")
    assert only_markup.clinician_question == "Why was the cath done?" and only_markup.repairs == 0
    assert "empty clinician question once markup was stripped" in only_markup.fallback


def test_archehr_record_and_usage_count_repairs_per_stage(dummy_lm, bundled_cases):
    case = replace(bundled_cases[0], answer_sentences=())
    answers = script(case)
    answers[0] = {"clinician_question": 'Why did he still need the surgery? ```json {"'}
    answers[2] = {"answer": "```\n**Troponin rose.** ECG changed.\n```"}
    dummy_lm(answers)
    contract = ArchEHRContract()
    record = contract.predict(program("archehr"), case)
    assert record["clinician_question"] == "Why did he still need the surgery?"
    assert record["answer"] == "Troponin rose. ECG changed." and record["fallbacks"] == {}
    assert record["repairs"] == {"question": 1, "answer": 1} and record["usage"]["answer"]["repairs"] == 1
    usage = contract.usage([record, {**record, "repairs": {"question": 1}}])
    assert usage["repairs"] == {"total": 3, "stages": {"question": 2, "answer": 1}}


def test_archehr2025_record_and_usage_count_repairs(dummy_lm, bundled_cases):
    dummy_lm([{"scores": [1, 1, 1, 5, 5, 4, 1, 1, 1, 1]},
              {"answer": "```markdown\n**Troponin rose to 0.9.** The ECG showed ST depressions.\n```"},
              {"citations": [["4"], ["5", "6"]]}])
    contract = ArchEHR2025Contract()
    record = contract.predict(program("archehr2025"), bundled_cases[0])
    assert record["answer"] == "Troponin rose to 0.9. |4|\nThe ECG showed ST depressions. |5,6|"
    assert record["repairs"] == {"answer": 1}
    assert contract.usage([record])["repairs"] == {"total": 1, "stages": {"answer": 1}}
