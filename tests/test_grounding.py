"""The grounding check: fabricated facts are flagged, paraphrases pass, drop mode edits the answer."""

import pytest

from tasks.archehr.data import NoteSentence
from tests.builders import program

pytestmark = pytest.mark.unit

NOTE = [NoteSentence("1", "HOSPITAL COURSE:"),
        NoteSentence("2", "Repeat troponin at 6 hours was elevated at 0.9."),
        NoteSentence("3", "She underwent cardiac catheterization with a drug-eluting stent."),
        NoteSentence("4", "She was started on aspirin and ticagrelor.")]


def check(*overrides):
    """The similarity check (program/archehr/grounding=similarity), whatever the default run's is."""
    return program("archehr", "program/archehr/grounding=similarity", *overrides)._grounding


def test_fabricated_drug_dose_and_changed_number_are_unsupported_and_a_paraphrase_passes():
    answer = [{"id": "1", "text": "Her repeat troponin rose to 0.9."},
              {"id": "2", "text": "She was also started on warfarin."},
              {"id": "3", "text": "Her troponin was 2.7 at six hours."},
              {"id": "4", "text": "She was given aspirin and ticagrelor to thin her blood."}]
    alignment = [{"answer_id": a, "evidence_id": e} for a, e in (("1", ["2"]), ("2", ["4"]), ("3", ["2"]), ("4", ["4"]))]
    verdicts = {v["answer_id"]: v for v in check()(answer, alignment, NOTE).verdicts}
    assert verdicts["1"]["verdict"] == "supported" and verdicts["1"]["support_ids"] == ["2"]
    assert verdicts["2"]["verdict"] == "not in the note" and "terms not in the note: warfarin" in verdicts["2"]["reasons"]
    assert verdicts["3"]["verdict"] == "not in the note" and "numbers not in the note: 2.7" in verdicts["3"]["reasons"]
    assert verdicts["4"]["verdict"] == "supported"


def test_drop_mode_removes_unsupported_sentences_and_their_links(dummy_lm, bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=())
    dummy_lm([{"clinician_question": "Why was catheterization performed?"},
              {"scores": [1, 1, 1, 5, 5, 5, 1, 1, 1, 1]},
              {"answer": "Troponin rose to 0.9. She was started on warfarin 5 mg."},
              {"citations": [["4"], ["9"]]}] * 2)
    pred = program("archehr", "program.grounding.on_unsupported=drop")(case=case)
    assert pred.answer == "Troponin rose to 0.9."
    assert pred.alignment == [{"answer_id": "1", "evidence_id": ["4"]}]
    assert [v["verdict"] for v in pred.grounding] == ["supported", "not in the note"]
    flagged = program("archehr")(case=case)  # flag (the default) keeps the sentence and marks it
    assert flagged.answer.endswith("warfarin 5 mg.") and flagged.grounding[1]["verdict"] == "not in the note"


def test_refill_mode_quotes_the_selected_evidence_in_place_of_a_dropped_sentence(dummy_lm, bundled_cases):
    from dataclasses import replace

    case = replace(bundled_cases[0], answer_sentences=())
    by_id = {s.id: s.text for s in case.sentences}
    dummy_lm([{"clinician_question": "Why was catheterization performed?"},
              {"scores": [1, 1, 1, 5, 5, 5, 1, 1, 1, 1]},
              {"answer": "Troponin rose to 0.9. She was started on warfarin 5 mg."},
              {"citations": [["4"], ["9"]]}])
    pred = program("archehr", "program.grounding.on_unsupported=refill")(case=case)
    # the warfarin sentence goes; the evidence sentences the kept one does not cite (5, 6) are quoted after it
    assert pred.evidence_ids == ["4", "5", "6"]
    assert pred.answer.startswith("Troponin rose to 0.9. " + by_id["5"])
    assert "warfarin" not in pred.answer and len(pred.answer.split()) <= 75
    quoted = [a for a in pred.alignment if a["answer_id"] not in ("1", "2")]
    assert quoted and quoted[0] == {"answer_id": "3", "evidence_id": ["5"]}
    assert [a["id"] for a in pred.answer_sentences][:2] == ["1", "3"]
    refilled = [v for v in pred.grounding if v.get("refill")]
    assert refilled and all(v["verdict"] == "supported" for v in refilled)
    assert [v["verdict"] for v in pred.grounding][:2] == ["supported", "not in the note"]


def test_grounding_can_be_switched_off(dummy_lm, bundled_cases):
    from dataclasses import replace

    dummy_lm([{"clinician_question": "Why?"}, {"scores": [1] * 10}, {"answer": "A."}, {"citations": [[]]}])
    pred = program("archehr", "program/archehr/grounding=none")(case=replace(bundled_cases[0], answer_sentences=()))
    assert pred.grounding is None and "grounding" not in pred.usage


def test_an_lm_judge_is_a_third_check_when_configured(dummy_lm):
    judge = check("program.grounding.judge=lm")
    dummy_lm([{"verdict": "not in the note", "kind": "quantity", "conflicting_words": "5 mg"},
              {"verdict": "supported", "kind": "none", "conflicting_words": ""}])
    answer = [{"id": "1", "text": "She was started on aspirin and ticagrelor."},
              {"id": "2", "text": "She was started on aspirin."}]
    alignment = [{"answer_id": "1", "evidence_id": ["4"]}, {"answer_id": "2", "evidence_id": ["4"]}]
    verdicts = judge(answer, alignment, NOTE).verdicts
    assert verdicts[0]["verdict"] == "not in the note"
    assert verdicts[0]["reasons"] == ["LM judge: not in the note (quantity): '5 mg'"]
    assert verdicts[0]["judge"] == {"verdict": "not in the note", "kind": "quantity", "conflicting_words": "5 mg"}
    assert verdicts[1]["verdict"] == "supported" and verdicts[1]["judge"]["kind"] == "none"
    assert check().judge is None  # no predictor unless configured


def test_an_lm_judge_reply_that_does_not_parse_is_said_and_flags_nothing(dummy_lm):
    judge = check("program.grounding.judge=lm")
    dummy_lm([{"verdict": "maybe", "kind": "none", "conflicting_words": ""}] * 2)
    answer = [{"id": "1", "text": "She was started on aspirin and ticagrelor."}]
    verdict = judge(answer, [{"answer_id": "1", "evidence_id": ["4"]}], NOTE).verdicts[0]
    assert verdict["verdict"] == "supported" and verdict["judge"]["unavailable"].startswith("LM judge unavailable")


def test_the_lm_judge_needs_an_lm():
    import pytest

    from common.errors import ConfigError
    from runners.program import choose_lm_or_no_lm, contract_for
    from tests.builders import config

    cfg = config("program/archehr/grounding=similarity", "program.grounding.judge=lm")
    assert "grounding" in contract_for(cfg).lm_roles(cfg)
    with pytest.raises(ConfigError, match=r"program=archehr: grounding needs an LM and none is chosen"):
        choose_lm_or_no_lm(cfg, contract_for(cfg))


# --- program/archehr/grounding=claims: support judged by what a sentence claims ----------------------------------
CLAIMS_NOTE = [NoteSentence("1", "Pertinent Results:"),
               NoteSentence("2", "[**2184-3-2**] 08:40PM BLOOD Creat-2.6* K-6.1* Na-136"),
               NoteSentence("3", "Foley placed in ED with drainage of 1450 mL of clear urine."),
               NoteSentence("4", "Given a DVT associated with HIT, anticoagulation with apixaban is planned for 3 "
                                 "months, after which Hematology will reassess."),
               NoteSentence("5", "Tamsulosin 0.4 mg was started on admission."),
               NoteSentence("6", "CTA head and neck: no large vessel occlusion.")]


def claims_check(*overrides):
    from hydra.utils import instantiate

    from common.resources import Resources
    from tests.builders import config, shared_embedder

    cfg = config("program=archehr", "program/archehr/grounding=claims", *overrides)
    return Resources(embedder=shared_embedder()).complete(instantiate(cfg.program.grounding, _convert_="all"),
                                                          "program.grounding", max_words=75, soft_cut_ratio=0.6)


def claims_verdicts(sentences: list[tuple[str, list[str]]], *overrides) -> list[dict]:
    answer = [{"id": str(n), "text": text} for n, (text, _) in enumerate(sentences, 1)]
    alignment = [{"answer_id": str(n), "evidence_id": cites} for n, (_, cites) in enumerate(sentences, 1)]
    return claims_check(*overrides)(answer, alignment, CLAIMS_NOTE).verdicts


def test_a_paraphrase_with_the_same_number_and_drug_is_supported():
    verdicts = claims_verdicts([
        ("He needs about 3 months of the blood thinner apixaban before the blood specialists check again.", ["4"]),
        ("Almost 1.5 liters of urine came out when the catheter went in.", ["3"]),
        ("His potassium was high at 6.1.", ["2"]),
        ("The scan showed no blocked large artery in the brain.", ["6"])])
    assert [v["verdict"] for v in verdicts] == ["supported"] * 4, [v["reasons"] for v in verdicts]


def test_an_injected_drug_test_result_or_changed_number_is_flagged():
    verdicts = claims_verdicts([
        ("He was also started on warfarin before discharge.", ["4"]),
        ("A lactate of 8.4 mmol/L was found.", ["2"]),
        ("Anticoagulation with apixaban is planned for 12 months.", ["4"]),
        ("Tamsulosin 4 mg was started on admission.", ["5"])])
    reasons = [v["reasons"] for v in verdicts]
    assert all(v["verdict"] == "not in the note" for v in verdicts), reasons
    assert reasons[0] == ["drugs not in the note: warfarin"]
    assert "tests not in the note: lactate" in reasons[1] and "numbers not in the note: 8.4 mmol/L" in reasons[1]
    assert reasons[2] == ["numbers not in the note: 12 months"] and reasons[3] == ["numbers not in the note: 4 mg"]


def test_a_number_found_only_in_an_unrelated_sentence_is_not_support():
    # 136 is in the note (the sodium on the lab line), but not in what this sentence rests on
    verdicts = claims_verdicts([("Anticoagulation with apixaban is planned for 136 days.", ["4"])],
                               "program.grounding.number_context=0")
    assert verdicts[0]["verdict"] == "not in the note"


def test_negation_checking_is_optional_and_flags_a_flipped_finding():
    flipped = [("The CTA showed a large vessel occlusion.", ["6"])]
    assert claims_verdicts(flipped)[0]["verdict"] == "supported"  # off by default (lay negation misfires)
    on = claims_verdicts(flipped, "program.grounding.check_negation=true")[0]
    assert on["verdict"] == "contradicted" and on["reasons"][0].startswith("negation differs from its support")


def test_claims_options_are_checked_in_one_line():
    import pytest

    from common.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^program.grounding.unknown_terms must be lexicon or tokenizer, not 'x'$"):
        claims_check("program.grounding.unknown_terms=x")


def test_report_html_marks_a_refilled_quote_and_a_judge_that_could_not_judge():
    from programs.archehr.report_html import _answer, readable
    from tasks.archehr.data import Case

    case = Case("c1", "n", sentences=tuple(NOTE))
    record = {"answer": "x", "alignment_source": "generated",
              "answer_sentences": [{"id": "1", "text": "Troponin rose to 0.9."}, {"id": "3", "text": NOTE[2].text}],
              "alignment": [{"answer_id": "1", "evidence_id": ["2"]}, {"answer_id": "3", "evidence_id": ["3"]}],
              "grounding": [{"answer_id": "1", "text": "Troponin rose to 0.9.", "verdict": "supported", "reasons": [],
                             "judge": {"unavailable": "LM judge unavailable (AdapterParseError: <no json>)"}},
                            {"answer_id": "3", "text": NOTE[2].text, "verdict": "supported", "reasons": [],
                             "refill": "quoted from the note after a flagged sentence was dropped"}]}
    html = _answer(case, readable(record))  # as report.html reads a record: the pipeline writes refill as a reason
    assert html.count("quoted from the note (refill)") == 1
    assert "LM judge unavailable (AdapterParseError: &lt;no json&gt;)" in html and "<no json>" not in html


def test_a_refill_run_says_which_sentences_are_quotes_and_counts_only_the_answers_own(dummy_lm, bundled_cases):
    from dataclasses import replace

    from programs.archehr import answers_md
    from programs.archehr.report import usage_summary

    case = replace(bundled_cases[0], answer_sentences=())
    dummy_lm([{"clinician_question": "Why was catheterization performed?"},
              {"scores": [1, 1, 1, 5, 5, 5, 1, 1, 1, 1]},
              {"answer": "Troponin rose to 0.9. She was started on warfarin 5 mg."},
              {"citations": [["4"], ["9"]]}])
    pred = program("archehr", "program.grounding.on_unsupported=refill")(case=case)
    record = {"case_id": case.case_id, "clinician_question": pred.clinician_question, "answer": pred.answer,
              "alignment_source": "generated", "answer_sentences": pred.answer_sentences,
              "alignment": pred.alignment, "grounding": pred.grounding}
    refilled = sum(bool(v.get("refill")) for v in pred.grounding)
    page = answers_md.render("archehr", "x.xml", [case], [record], {}, "claims")
    assert page.count("(quoted from the note: refill)") == refilled >= 1
    grounding = usage_summary([{**record, "usage": {}, "seconds": 0.0}], ("question",))["grounding"]
    assert grounding["refilled"] == refilled and grounding["answer_sentences"] == len(pred.grounding) - refilled
    assert grounding["unsupported"] == 1
