import json

import pytest

from tasks.archehr.data import ArchEHRDataError, load_cases, load_key
from tests.conftest import BUNDLED_KEY, DEV_QUESTIONS


def test_bundled_cases_load_with_string_ids_and_stripped_text(bundled_cases):
    assert [c.case_id for c in bundled_cases] == ["901", "902", "903"]
    case = bundled_cases[0]
    assert case.sentence_ids == [str(i) for i in range(1, 11)]
    assert case.sentences[0].text == "HOSPITAL COURSE:"
    assert case.patient_narrative.startswith("My mother went")
    assert case.clinician_question == "Why was cardiac catheterization performed instead of a stress test?"
    assert bundled_cases[2].patient_question_phrases == ("Nobody told me why.",
                                                         "Should I start taking it again now that I am home?")


def test_public_dev_questions_load_without_notes():
    cases = load_cases(DEV_QUESTIONS)
    assert len(cases) == 20 and all(c.clinician_question and not c.sentences for c in cases)


def test_key_loads_relevance_and_citations():
    key = load_key(BUNDLED_KEY)
    assert key["901"].essential == {"4", "5", "6"}
    assert key["901"].supplementary == {"2", "3", "7"}
    assert key["903"].answer_sentences[0] == ("1", key["903"].answer_sentences[0][1], ["3", "4"])


def write(tmp_path, text, name="cases.xml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_malformed_xml_names_the_file(tmp_path):
    path = write(tmp_path, "<annotations><case id='1'><patient_narrative>x</case></annotations>")
    with pytest.raises(ArchEHRDataError, match=r"cases\.xml: malformed XML"):
        load_cases(path)


def test_missing_narrative_names_case_and_element(tmp_path):
    path = write(tmp_path, "<annotations><case id='7'><clinician_question>q</clinician_question></case></annotations>")
    with pytest.raises(ArchEHRDataError, match=r"case 7: missing or empty <patient_narrative>"):
        load_cases(path)


def test_duplicate_sentence_ids_are_rejected(tmp_path):
    path = write(tmp_path, """<annotations><case id="3"><patient_narrative>n</patient_narrative>
      <note_excerpt_sentences><sentence id="1">a</sentence><sentence id="1">b</sentence></note_excerpt_sentences>
      </case></annotations>""")
    with pytest.raises(ArchEHRDataError, match=r"case 3: duplicate note sentence id '1'"):
        load_cases(path)


def test_wrong_root_and_missing_file(tmp_path):
    with pytest.raises(ArchEHRDataError, match="expected <annotations>"):
        load_cases(write(tmp_path, "<cases/>"))
    with pytest.raises(ArchEHRDataError, match="no such file"):
        load_cases(tmp_path / "nope.xml")


def test_bad_key_files(tmp_path):
    with pytest.raises(ArchEHRDataError, match="malformed JSON"):
        load_key(write(tmp_path, "[{", "k.json"))
    with pytest.raises(ArchEHRDataError, match="relevance must be one of"):
        load_key(write(tmp_path, json.dumps([{"case_id": "1", "answers": [{"sentence_id": "1", "relevance": "high"}]}]),
                       "k.json"))
    # a comma-separated citation string (seen in participant code) is accepted
    key = load_key(write(tmp_path, json.dumps([{"case_id": "1", "clinician_answer_sentences": [
        {"id": "1", "text": "t", "citations": "2, 5"}]}]), "k.json"))
    assert key["1"].answer_sentences == [("1", "t", ["2", "5"])]
