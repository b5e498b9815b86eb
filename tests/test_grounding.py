"""The grounding check: fabricated facts are flagged, paraphrases pass, drop mode edits the answer."""

from tasks.archehr.data import NoteSentence
from tests.builders import program

NOTE = [NoteSentence("1", "HOSPITAL COURSE:"),
        NoteSentence("2", "Repeat troponin at 6 hours was elevated at 0.9."),
        NoteSentence("3", "She underwent cardiac catheterization with a drug-eluting stent."),
        NoteSentence("4", "She was started on aspirin and ticagrelor.")]


def check(*overrides):
    return program("archehr", *overrides)._grounding


def test_fabricated_drug_dose_and_changed_number_are_unsupported_and_a_paraphrase_passes():
    answer = [{"id": "1", "text": "Her repeat troponin rose to 0.9."},
              {"id": "2", "text": "She was also started on warfarin."},
              {"id": "3", "text": "Her troponin was 2.7 at six hours."},
              {"id": "4", "text": "She was given aspirin and ticagrelor to thin her blood."}]
    alignment = [{"answer_id": a, "evidence_id": e} for a, e in (("1", ["2"]), ("2", ["4"]), ("3", ["2"]), ("4", ["4"]))]
    verdicts = {v["answer_id"]: v for v in check()(answer, alignment, NOTE).verdicts}
    assert verdicts["1"]["verdict"] == "supported" and verdicts["1"]["support_ids"] == ["2"]
    assert verdicts["2"]["verdict"] == "unsupported" and "terms not in the note: warfarin" in verdicts["2"]["reasons"]
    assert verdicts["3"]["verdict"] == "unsupported" and "numbers not in the note: 2.7" in verdicts["3"]["reasons"]
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
    assert [v["verdict"] for v in pred.grounding] == ["supported", "unsupported"]
    flagged = program("archehr")(case=case)  # flag (the default) keeps the sentence and marks it
    assert flagged.answer.endswith("warfarin 5 mg.") and flagged.grounding[1]["verdict"] == "unsupported"


def test_grounding_can_be_switched_off(dummy_lm, bundled_cases):
    from dataclasses import replace

    dummy_lm([{"clinician_question": "Why?"}, {"scores": [1] * 10}, {"answer": "A."}, {"citations": [[]]}])
    pred = program("archehr", "program/archehr/grounding=none")(case=replace(bundled_cases[0], answer_sentences=()))
    assert pred.grounding is None and "grounding" not in pred.usage


def test_an_lm_judge_is_a_third_check_when_configured(dummy_lm):
    judge = check("program.grounding.judge=lm")
    dummy_lm([{"supported": False, "reason": "the note gives no dose"}, {"supported": True, "reason": "stated"}])
    answer = [{"id": "1", "text": "She was started on aspirin and ticagrelor."},
              {"id": "2", "text": "She was started on aspirin."}]
    alignment = [{"answer_id": "1", "evidence_id": ["4"]}, {"answer_id": "2", "evidence_id": ["4"]}]
    verdicts = judge(answer, alignment, NOTE).verdicts
    assert verdicts[0]["verdict"] == "unsupported" and verdicts[0]["reasons"] == ["LM judge: the note gives no dose"]
    assert verdicts[1]["verdict"] == "supported"
    assert check().judge is None  # no predictor unless configured


def test_the_lm_judge_needs_an_lm():
    import pytest

    from common.errors import ConfigError
    from runners.program import choose_lm_or_offline, contract_for
    from tests.builders import config

    cfg = config("program/archehr/grounding=similarity", "program.grounding.judge=lm")
    assert "grounding" in contract_for(cfg).lm_roles(cfg)
    with pytest.raises(ConfigError, match=r"program=archehr: grounding needs an LM and none is chosen"):
        choose_lm_or_offline(cfg, contract_for(cfg))
