import json

import pytest

from tasks.archehr.data import ArchEHRDataError, load_cases, load_key
from tests.conftest import BUNDLED_CASES, BUNDLED_KEY, DEV_QUESTIONS

pytestmark = pytest.mark.unit


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


def test_thirty_thousand_cases_are_checked_for_duplicate_ids_in_one_pass(tmp_path):
    """Issue #28 probe: the duplicate-case-id check counted each id over the whole list (30,000 cases posted as one
    `xml` body took 17 s, blocking the server)."""
    import time

    cases = "".join(f"<case id='{i}'><patient_narrative>a</patient_narrative></case>" for i in range(30_000))
    path = write(tmp_path, f"<annotations>{cases}<case id='7'><patient_narrative>b</patient_narrative></case>"
                           "</annotations>")
    start = time.monotonic()
    with pytest.raises(ArchEHRDataError, match=r"duplicate case ids \['7'\]"):
        load_cases(path)
    assert time.monotonic() - start < 5


def test_wrong_root_and_missing_file(tmp_path):
    with pytest.raises(ArchEHRDataError, match="expected <annotations>"):
        load_cases(write(tmp_path, "<cases/>"))
    with pytest.raises(ArchEHRDataError, match="no such file"):
        load_cases(tmp_path / "nope.xml")


def test_bad_key_files(tmp_path):
    with pytest.raises(ArchEHRDataError, match="malformed JSON"):
        load_key(write(tmp_path, "[{", "k.json"))
    # JSON nested deeper than Python reads (a RecursionError traceback before): the same one line
    with pytest.raises(ArchEHRDataError, match=r"deep.json: malformed JSON \(JSON nested too deeply to read\)"):
        load_key(write(tmp_path, "[" * 100_000 + "]" * 100_000, "deep.json"))
    bad_entries = {
        "high": [{"case_id": "1", "answers": [{"sentence_id": "1", "relevance": "high"}]}],
        "string": [{"case_id": "1", "answers": ["essential"]}],
        "null": [{"case_id": "1", "answers": None}],
    }
    for name, content in bad_entries.items():
        path = write(tmp_path, json.dumps(content), f"{name}.json")
        with pytest.raises(ArchEHRDataError, match=rf"{name}\.json, entry 0 \(case 1\): .*'answers'"):
            load_key(path)
    dupe = write(tmp_path, json.dumps([{"case_id": "1"}, {"case_id": "1"}]), "dupe.json")
    with pytest.raises(ArchEHRDataError, match=r"dupe.json, entry 1 \(case 1\): duplicate case_id"):
        load_key(dupe)
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('[{"case_id": "1", "clinician_answer_without_citations": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(ArchEHRDataError, match=r"latin1.json: not UTF-8"):
        load_key(latin1)
    # a comma-separated citation string (seen in participant code) is accepted
    key = load_key(write(tmp_path, json.dumps([{"case_id": "1", "clinician_answer_sentences": [
        {"id": "1", "text": "t", "citations": "2, 5"}]}]), "k.json"))
    assert key["1"].answer_sentences == [("1", "t", ["2", "5"])]


def test_a_key_must_belong_to_its_cases(tmp_path, bundled_cases):
    from tasks.archehr.data import check_key, resolve_key

    key = load_key(BUNDLED_KEY)
    check_key(key, bundled_cases, BUNDLED_KEY)  # the bundled key fits the bundled cases
    with pytest.raises(ArchEHRDataError, match=r"case ids \['903'\] are not in the cases file"):
        check_key(key, bundled_cases[:2], BUNDLED_KEY)
    with pytest.raises(ArchEHRDataError, match=r"cases \['903'\] have no key entry"):
        check_key({k: v for k, v in key.items() if k != "903"}, bundled_cases, BUNDLED_KEY)
    key["901"].relevance["77"] = "essential"
    with pytest.raises(ArchEHRDataError, match=r"case 901: sentence ids \['77'\] are not in that case's note"):
        check_key(key, bundled_cases, BUNDLED_KEY)
    # data.key=auto finds <stem>_key.json beside the cases, and nothing for a user's own file
    assert resolve_key(BUNDLED_CASES, "auto") == BUNDLED_KEY
    own = tmp_path / "mine.xml"
    own.write_text("<annotations/>")
    assert resolve_key(own, "auto") is None and resolve_key(own, None) is None


# --- an uploaded XML file's bytes, decoded as data.cases reads the file (issue 69) -------------------------------------
def test_uploaded_xml_bytes_are_decoded_by_their_declaration_as_the_file_is(tmp_path):
    import base64

    from pydantic import ValidationError

    from programs.archehr.contract import ArchEHRContract
    from programs.archehr.serve_schemas import ArchEHRRequest
    from tasks.archehr.data import decode_xml

    xml = ('<?xml version="1.0" encoding="ISO-8859-1"?>\n<annotations><case id="c1"><patient_narrative>Trait\u00e9e.'
           '</patient_narrative><note_excerpt_sentences><sentence id="1">Fi\u00e8vre.</sentence>'
           '</note_excerpt_sentences></case></annotations>').encode("latin-1")
    path = tmp_path / "latin1.xml"
    path.write_bytes(xml)
    request = ArchEHRRequest(xml_base64=base64.b64encode(xml).decode())
    assert ArchEHRContract().serve_item(request) == load_cases(path)[0]
    assert decode_xml("<a>Fi\u00e8vre.</a>".encode("utf-16")) == "<a>Fi\u00e8vre.</a>"  # a byte order mark
    with pytest.raises(ArchEHRDataError, match=r"not utf-8 \(byte 0xe9 at offset 3\); save it as UTF-8, or declare its "
                                               r"encoding"):
        decode_xml("<a>\u00e9</a>".encode("latin-1"))
    with pytest.raises(ArchEHRDataError, match=r"declares encoding 'x-nope', which is not one Python reads"):
        decode_xml(b'<?xml version="1.0" encoding="x-nope"?><a/>')
    with pytest.raises(ArchEHRDataError, match=r"^xml_base64: not base64"):
        ArchEHRContract().serve_item(ArchEHRRequest(xml_base64="@@@"))
    with pytest.raises(ValidationError, match="give the case as xml or as xml_base64, not both"):
        ArchEHRRequest(xml="<annotations/>", xml_base64="")
