"""Plain inputs (issue 53): JSON lines / CSV rows of free-text notes for the ArchEHR programs, and JSON lines / CSV /
a folder of .txt notes for MEDIQA-CORR, split into numbered sentences by common/note_text; every bad row one line
naming the file, the row and the field; the numbered notes written back and read back by the tasks' own loaders."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.note_text import cut_long, numbered_note, split_note
from common.plain_rows import PlainInputError, Table, read_folder, read_rows
from tasks.archehr.case_xml import cases_xml
from tasks.archehr.data import ArchEHRDataError, load_cases
from tasks.archehr.plain_cases import load_plain_cases
from tasks.mediqa_corr.data import load_notes
from tasks.mediqa_corr.notes_csv import notes_csv
from tasks.mediqa_corr.plain_notes import is_plain_notes, load_plain_notes

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"max_message_chars": 2000, "max_note_chars": 20000, "max_sentences": 50, "max_sentence_chars": 300}
NOTE = ("HOSPITAL COURSE: 71 year old man admitted with a left lower leg cellulitis. He was treated with IV cefazolin "
        "and the erythema receded. Blood cultures remained negative.\nDischarge plan: cephalexin 500 mg PO QID for 5 "
        "days.")
ROW = {"id": "a1", "message": "Why does my father still need antibiotics at home?", "note": NOTE}


def jsonl(tmp_path: Path, *rows: object, name: str = "notes.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def csv_file(tmp_path: Path, header: list[str], *rows: list[str], name: str = "notes.csv") -> Path:
    path = tmp_path / name
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# --- ArchEHR: the formats -----------------------------------------------------------------------------------------
def test_jsonl_rows_become_cases_with_sentences_numbered_from_1_by_the_pages_splitter(tmp_path):
    path = jsonl(tmp_path, {**ROW, "patient_question": ["Why antibiotics at home?"], "clinician_question": "Why?",
                            "answer": "He had cellulitis. It needs 5 more days.", "mrn": "123"})
    [case] = load_plain_cases(path, LIMITS).cases
    assert case.case_id == "a1" and case.patient_narrative == ROW["message"]
    assert [s.text for s in case.sentences] == split_note(NOTE)
    assert [s.id for s in case.sentences] == ["1", "2", "3", "4"]
    assert case.sentences[3].text == "Discharge plan: cephalexin 500 mg PO QID for 5 days."
    assert case.patient_question_phrases == ("Why antibiotics at home?",) and case.clinician_question == "Why?"
    assert [(a.id, a.text) for a in case.answer_sentences] == [("1", "He had cellulitis."), ("2", "It needs 5 more days.")]
    assert case.note_excerpt == NOTE


def test_csv_rows_read_the_same_as_jsonl_rows_including_quoted_multiline_notes(tmp_path):
    from_csv = load_plain_cases(csv_file(tmp_path, ["id", "message", "note", "clinician_question"],
                                         ["a1", ROW["message"], NOTE, ""]), LIMITS).cases
    from_jsonl = load_plain_cases(jsonl(tmp_path, ROW), LIMITS).cases
    assert from_csv == from_jsonl  # an empty optional cell is no clinician question, not an empty one


def test_a_utf8_bom_and_numeric_ids_are_read(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_bytes("\ufeffid,message,note\n7,Why?,Stable.\n".encode())
    [case] = load_plain_cases(path, LIMITS).cases
    assert case.case_id == "7" and [s.text for s in case.sentences] == ["Stable."]


# --- ArchEHR: each bad row is one line naming the file, the row and the field ------------------------------------
@pytest.mark.parametrize(("rows", "says"), [
    ([{"id": "a1", "message": "Why?"}], ["line 1 (id 'a1')", "no field 'note'"]),
    ([{**ROW, "note": "   "}], ["line 1 (id 'a1')", "an empty field 'note'"]),
    ([ROW, {**ROW, "message": "Again?"}], ["line 2 (id 'a1')", "duplicate id (first at line 1)"]),
    ([{**ROW, "message": "x" * 2001}], ["line 1 (id 'a1')", "field 'message' has 2,001 characters",
                                         "data.plain.max_message_chars=2000"]),
    ([{**ROW, "note": "\n".join(f"Line {n}." for n in range(51))}],
     ["line 1 (id 'a1')", "'note' splits into 51 sentences", "data.plain.max_sentences=50"]),
    ([{**ROW, "note": "ok \ud800 text"}], ["line 1 (id 'a1')", "field 'note' holds a lone surrogate (U+D800"]),
    ([{**ROW, "message": "bell \x07"}], ["field 'message' holds a control character (U+0007"]),
    ([{**ROW, "note": {"text": "x"}}], ["line 1 (id 'a1')", "field 'note' is a JSON dict, not text"]),
    (["[1, 2]"], ["line 1: a JSON list, not an object"]),
    (['{"id": "a1", "message": '], ["line 1: not a JSON object"]),
])
def test_each_bad_jsonl_row_is_one_error_naming_file_row_and_field(tmp_path, rows, says):
    path = jsonl(tmp_path, *rows)
    with pytest.raises(PlainInputError) as err:
        load_plain_cases(path, LIMITS)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message
    for part in says:
        assert part in message


def test_bad_csv_files_name_the_row(tmp_path):
    no_note = csv_file(tmp_path, ["id", "message", "text"], ["a1", "Why?", NOTE])
    with pytest.raises(PlainInputError, match=r"row 1 \(the header\): no column 'note'"):
        load_plain_cases(no_note, LIMITS)
    short = tmp_path / "short.csv"
    short.write_text("id,message,note\na1,Why?\n", encoding="utf-8")
    with pytest.raises(PlainInputError, match=r"short.csv, row 2: 2 of the header's 3 cells"):
        load_plain_cases(short, LIMITS)
    cut = tmp_path / "cut.csv"
    cut.write_text('id,message,note\na1,Why?,Fine.\na2,Why?,"Stable.\n', encoding="utf-8")  # a quote left open
    with pytest.raises(PlainInputError, match=r"cut.csv, row 3: malformed CSV \(unexpected end of data\)"):
        load_plain_cases(cut, LIMITS)
    extra = tmp_path / "extra.csv"
    extra.write_text("id,message,note\na1,Why?,Stable.,more\n", encoding="utf-8")
    with pytest.raises(PlainInputError, match=r"extra.csv, row 2: more cells than the header's 3 columns"):
        load_plain_cases(extra, LIMITS)
    dup = csv_file(tmp_path, ["id", "message", "note"], ["a1", "Why?", NOTE], ["a1", "And?", NOTE], name="dup.csv")
    with pytest.raises(PlainInputError, match=r"dup.csv, row 3 \(id 'a1'\): duplicate id \(first at row 2\)"):
        load_plain_cases(dup, LIMITS)


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(json.dumps(ROW).encode() + b"\n" + '{"id": "a2", "message": "caf\xe9"}'.encode("latin-1") + b"\n")
    with pytest.raises(PlainInputError, match=r"notes.jsonl, line 2: not UTF-8 \(byte 0xe9"):
        load_plain_cases(path, LIMITS)


def test_a_note_cell_over_the_csv_modules_own_limit_gets_the_knobs_message(tmp_path):
    # the csv module refuses cells over 131072 characters; the reader lets the configured limit speak instead
    path = csv_file(tmp_path, ["id", "message", "note"], ["a1", "Why?", "Stable. " * 20000])
    with pytest.raises(PlainInputError, match=r"row 2 \(id 'a1'\): field 'note' has 160,000 characters, over "
                                              r"data.plain.max_note_chars=150000"):
        load_plain_cases(path, {**LIMITS, "max_note_chars": 150000})
    assert csv.field_size_limit() == 131072  # restored for every other reader


def test_limits_that_cannot_work_are_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"^data.plain.max_sentence_chars must be an integer >= 1, not 0$"):
        load_plain_cases(jsonl(tmp_path, ROW), {**LIMITS, "max_sentence_chars": 0})


# --- a sentence the splitter cannot split ---------------------------------------------------------------------------
def test_a_5000_character_sentence_is_cut_by_length_at_spaces_and_the_cases_say_which(tmp_path, caplog):
    long = " ".join(f"item{n} value {n % 7}" for n in range(400))[:5000]   # a pasted table: no full stop
    path = jsonl(tmp_path, {**ROW, "note": f"Labs:\n{long}\nHe is stable."})
    plain = load_plain_cases(path, LIMITS)
    [case] = plain.cases
    texts = [s.text for s in case.sentences]
    assert texts[0] == "Labs:" and texts[-1] == "He is stable."
    pieces = texts[1:-1]
    assert len(pieces) == 17 and all(len(p) <= 300 for p in pieces)
    assert " ".join(pieces) == " ".join(long.split())  # nothing lost, every cut at a space
    assert plain.cut == {"a1": [[str(n) for n in range(2, 19)]]}
    assert "cut by length into sentences 2-18" in caplog.text and "line 1 (id 'a1')" in caplog.text


def test_cut_long_cuts_anywhere_when_a_piece_has_no_space():
    assert cut_long("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert numbered_note("Short one. Short two.", 10) == (["Short one.", "Short two."], [])


# --- the numbered notes, written and read back ----------------------------------------------------------------------
def test_numbered_cases_xml_reads_back_as_the_same_cases(tmp_path):
    long = "word " * 400
    plain = load_plain_cases(jsonl(tmp_path, {**ROW, "patient_question": "Why antibiotics?", "answer": "One. Two."},
                                   {"id": "b<&>", "message": "Tab\there & <there>?", "note": f"A -- B.\n{long}"}),
                             LIMITS)
    written = tmp_path / "numbered_cases.xml"
    written.write_text(cases_xml(plain.cases, plain.cut, "notes.jsonl", 300), encoding="utf-8")
    assert load_cases(written) == plain.cases
    assert "sentences 2-8: one sentence of the note over 300 characters" in written.read_text(encoding="utf-8")


# --- MEDIQA-CORR ------------------------------------------------------------------------------------------------------
def test_mediqa_notes_from_jsonl_csv_and_a_txt_folder_are_numbered_from_0_as_medec(tmp_path):
    a = jsonl(tmp_path, {"id": "n1", "note": NOTE})
    b = csv_file(tmp_path, ["id", "note"], ["n1", NOTE])
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "n1.txt").write_text(NOTE, encoding="utf-8")
    (folder / "readme.md").write_text("not a note", encoding="utf-8")
    read = [load_plain_notes(p, LIMITS) for p in (a, b, folder)]
    assert read[0].notes == read[1].notes == read[2].notes
    [note] = read[0].notes
    assert note.text_id == "n1" and note.sentence_ids == ["0", "1", "2", "3"]
    assert note.sentence("0").startswith("HOSPITAL COURSE:")
    assert read[2].files == {"notes/n1.txt": str(folder / "n1.txt")}


def test_medec_csv_stays_medec_and_plain_inputs_are_told_apart():
    medec = ROOT / "data" / "mediqa_corr" / "MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv"
    assert not is_plain_notes(medec)


def test_numbered_notes_csv_reads_back_with_the_medec_loader(tmp_path):
    plain = load_plain_notes(jsonl(tmp_path, {"id": "n1", "note": NOTE}, {"id": "n2", "note": "12 mg given.\n3 doses."}),
                             LIMITS)
    written = tmp_path / "numbered_notes.csv"
    written.write_text(notes_csv(plain.notes), encoding="utf-8")
    assert load_notes(written) == plain.notes


def test_bad_txt_notes_name_the_file(tmp_path):
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "n1.txt").write_bytes(b"Stable.\nTemp 38\xb0C.\n")
    with pytest.raises(PlainInputError, match=r"n1.txt, line 2: not UTF-8"):
        load_plain_notes(folder, LIMITS)
    (folder / "n1.txt").write_text("  \n", encoding="utf-8")
    with pytest.raises(PlainInputError, match=r"n1.txt \(id 'n1'\): an empty field 'note'"):
        load_plain_notes(folder, LIMITS)
    (folder / "n1.txt").write_text("Fine.", encoding="utf-8")
    (folder / "n 2.txt").write_text("Fine.", encoding="utf-8")
    with pytest.raises(PlainInputError, match=r"n 2.txt \(id 'n 2'\): the id 'n 2' is outside the official scorer's "
                                              r"pattern \[a-z0-9-\]\+.*\(e.g. 'n-2'\)"):
        load_plain_notes(folder, LIMITS)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PlainInputError, match=r"no .txt files"):
        read_folder(empty, Table(required=("id", "note")), "note")


def test_rows_report_unknown_columns_once_and_keep_the_known_ones(tmp_path, caplog):
    rows = read_rows(jsonl(tmp_path, {"id": 1, "note": "x", "mrn": 5}, {"id": 2, "note": "y", "mrn": 6}),
                     Table(required=("id", "note")))
    assert [r.values for r in rows] == [{"id": "1", "note": "x"}, {"id": "2", "note": "y"}]
    assert caplog.text.count("columns ['mrn'] are not read") == 1


# --- a note as a hospital writes it: numbered list lines, a note already split (issue 69) ------------------------------
MEDS = ("Discharge Medications:\n1. Aspirin 81 mg PO DAILY\n2. Nimodipine 60 mg PO q4h x 5 more days\n"
        "10. Docusate Sodium 100 mg PO BID. Hold for loose stools.")


def test_a_numbered_list_line_keeps_its_number_and_the_later_ids_do_not_shift(tmp_path):
    """`1. Aspirin 81 mg PO DAILY` was two sentences, `1.` and `Aspirin 81 mg PO DAILY`: every later id shifted."""
    [case] = load_plain_cases(jsonl(tmp_path, {**ROW, "note": MEDS}), LIMITS).cases
    assert [s.text for s in case.sentences] == ["Discharge Medications:", "1. Aspirin 81 mg PO DAILY",
                                                "2. Nimodipine 60 mg PO q4h x 5 more days",
                                                "10. Docusate Sodium 100 mg PO BID.", "Hold for loose stools."]
    assert split_note("Plan reviewed. 2. Statin at night.") == ["Plan reviewed.", "2. Statin at night."]
    assert split_note("He took 2. Then he slept.") == ["He took 2.", "Then he slept."]  # a number ending a sentence


def test_a_list_written_on_one_line_gives_each_item_its_own_sentence_with_its_number():
    """"Discharge Medications: 1. Apixaban 5 mg PO BID 2. Atorvastatin" was split after each number: "...: 1.",
    "Apixaban 5 mg PO BID 2.", ..."""
    assert split_note("Discharge Medications: 1. Apixaban 5 mg PO BID 2. Atorvastatin 40 mg daily 3. Metoprolol.") == [
        "Discharge Medications:", "1. Apixaban 5 mg PO BID", "2. Atorvastatin 40 mg daily", "3. Metoprolol."]
    assert split_note("Plan: 1. Raise the dose to 2. 2. Recheck labs.") == [  # a number that ends an item stays
        "Plan:", "1. Raise the dose to 2.", "2. Recheck labs."]
    assert split_note("He had 3 admissions. 2. Not a list.") == ["He had 3 admissions.", "2. Not a list."]  # no 1.


def test_an_abbreviation_inside_a_note_line_ends_no_sentence():
    """A note written one sentence a line split "procedures (e.g. TURP)" in two: its later ids shifted against the
    same note as an XML case."""
    assert split_note("Options include outlet procedures (e.g. TURP) if he fails. Seen by Dr. Lee today.") == [
        "Options include outlet procedures (e.g. TURP) if he fails.", "Seen by Dr. Lee today."]
    assert split_note("Creatinine rose. Ie. Worse.") == ["Creatinine rose.", "Ie.", "Worse."]  # not an abbreviation


def test_data_plain_split_lines_takes_each_line_as_one_sentence_as_given(tmp_path):
    note = "Seen today. No fever.\n  1. Aspirin 81 mg  \n\nA. Plan: home."
    [case] = load_plain_cases(jsonl(tmp_path, {**ROW, "note": note, "answer": "One. Two."}),
                              {**LIMITS, "split": "lines"}).cases
    assert [s.text for s in case.sentences] == ["Seen today. No fever.", "1. Aspirin 81 mg", "A. Plan: home."]
    assert [a.text for a in case.answer_sentences] == ["One. Two."]
    [note_0] = load_plain_notes(jsonl(tmp_path, {"id": "n1", "note": note}, name="n.jsonl"),
                                {**LIMITS, "split": "lines"}).notes
    assert note_0.sentence_ids == ["0", "1", "2"]
    with pytest.raises(ConfigError, match=r"data.plain.split must be one of sentences, lines .*not 'words'"):
        load_plain_cases(jsonl(tmp_path, ROW), {**LIMITS, "split": "words"})


def test_a_bidi_control_after_a_full_stop_still_ends_the_sentence():
    assert split_note("Treated for pneumonia.\u202c He improved.") == ["Treated for pneumonia.\u202c", "He improved."]


# --- MEDIQA-CORR: one id rule for runs and requests (issue 69) ----------------------------------------------------------
@pytest.mark.parametrize(("rid", "suggested"), [("Note_1", "note-1"), ("A", "a"), ("Patient_01", "patient-01")])
def test_a_mediqa_id_the_official_scorer_skips_is_refused_before_any_model(tmp_path, rid, suggested):
    """Such ids ran, then `write_submission` crashed with a traceback and no submission.txt."""
    with pytest.raises(PlainInputError) as err:
        load_plain_notes(jsonl(tmp_path, {"id": "ok-1", "note": NOTE}, {"id": rid, "note": NOTE}), LIMITS)
    assert str(err.value) == (f"{tmp_path / 'notes.jsonl'}, line 2 (id {rid!r}): the id {rid!r} is outside the official "
                              "scorer's pattern [a-z0-9-]+, so no submission.txt line can hold it; use lowercase "
                              f"letters, digits and '-' only (e.g. {suggested!r})")


def test_the_api_applies_the_same_id_rule():
    from pydantic import ValidationError

    from programs.mediqa_corr.serve_schemas import MediqaRequest

    with pytest.raises(ValidationError, match=r"text_id: the id 'Note_1 x' is outside the official scorer's pattern"):
        MediqaRequest(text_id="Note_1 x", note="Stable.")
    assert MediqaRequest(text_id="note-1", note="Stable.").text_id == "note-1"


# --- bad input accepted in silence, error lines that say what to do (issue 69) -----------------------------------------
def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    path = csv_file(tmp_path, ["id", "id", "message", "note"], ["a1", "a2", "Why?", NOTE])
    with pytest.raises(PlainInputError, match=r"row 1 \(the header\): column 'id' appears 2 times; name each column "
                                              r"once"):
        load_plain_cases(path, LIMITS)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_jsonl_nan_or_infinity_id_is_refused(tmp_path, value):
    path = jsonl(tmp_path, f'{{"id": {value}, "message": "Why?", "note": "Stable."}}')
    with pytest.raises(PlainInputError, match=r"line 1: field 'id' is -?(nan|inf), not text or a number; write it as a "
                                              r"string"):
        load_plain_cases(path, LIMITS)


def test_a_folder_or_a_fifo_named_like_a_table_is_named_as_such(tmp_path):
    folder = tmp_path / "x.jsonl"
    folder.mkdir()
    with pytest.raises(PlainInputError, match=r"x.jsonl: a folder, not a file; name the file itself"):
        load_plain_cases(folder, LIMITS)
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    with pytest.raises(PlainInputError, match=r"f.csv: not a regular file \(a FIFO, socket or device\)"):
        load_plain_cases(fifo, LIMITS)
    with pytest.raises(ArchEHRDataError, match=r"f.csv: not a regular file"):
        load_cases(fifo)


def test_a_csv_cell_over_the_readers_limit_names_the_knob(tmp_path):
    path = csv_file(tmp_path, ["id", "message", "note"], ["a1", "Why?", "x" * 450_000])
    with pytest.raises(PlainInputError, match=r"row 2: a cell over 400,000 characters, .*the largest limit is "
                                              r"data.plain.max_note_chars=200000\); shorten it, or raise "
                                              r"data.plain.max_note_chars"):
        load_plain_cases(path, {**LIMITS, "max_note_chars": 200000})


@pytest.mark.parametrize(("sep", "name"), [(";", "semicolons"), ("\t", "tabs")])
def test_a_csv_with_another_separator_says_so(tmp_path, sep, name):
    path = tmp_path / "notes.csv"
    path.write_text(f"id{sep}message{sep}note\na1{sep}Why?{sep}Stable.\n", encoding="utf-8")
    with pytest.raises(PlainInputError, match=f"its header is separated by {name}: save it with commas"):
        load_plain_cases(path, LIMITS)


@pytest.mark.parametrize("suffix", [".json", ".tsv", ".txt"])
def test_cases_of_another_suffix_say_which_files_are_read(tmp_path, suffix):
    path = tmp_path / f"cases{suffix}"
    path.write_text(json.dumps(ROW), encoding="utf-8")
    with pytest.raises(ArchEHRDataError, match=f"malformed XML .*; a {suffix} file is read as XML: cases are .xml, or "
                                               "plain rows .jsonl or .csv"):
        load_cases(path)


def test_an_xml_case_with_a_medication_list_and_its_jsonl_one_sentence_a_line_have_the_same_sentences(tmp_path):
    """The same cases as XML and as JSONL gave other Subtask 2 and 4 submissions: the list numbers shifted the ids."""
    texts = MEDS.split("\n")[:3] + ["10. Docusate Sodium 100 mg PO BID.", "Hold for loose stools.", "3) Senna 8.6 mg."]
    sentences = "".join(f'<sentence id="{n}">{t}</sentence>' for n, t in enumerate(texts, 1))
    xml = tmp_path / "cases.xml"
    xml.write_text(f'<annotations><case id="a1"><patient_narrative>{ROW["message"]}</patient_narrative>'
                   f"<note_excerpt_sentences>{sentences}</note_excerpt_sentences></case></annotations>",
                   encoding="utf-8")
    [from_xml] = load_cases(xml)
    [from_jsonl] = load_plain_cases(jsonl(tmp_path, {**ROW, "note": "\n".join(texts)}), LIMITS).cases
    assert [(s.id, s.text) for s in from_jsonl.sentences] == [(s.id, s.text) for s in from_xml.sentences]
