"""The learned non-LLM stages: what they select and link on small notes, their saved state (refused when it does not
fit the code), and task=compile fitting them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.errors import ClinprogError
from programs.archehr.offline.claims import quantities, unsupported_quantities
from programs.archehr.offline.clinical_lexicon import concepts
from programs.archehr.offline.features import EVIDENCE_FEATURES, split_anchor
from programs.archehr.offline.learned_state import LearnedStateError, load_stage_state
from programs.archehr.offline.note_layout import layout
from tasks.archehr.data import AnswerSentence, NoteSentence
from tests.builders import archehr_stage, config, shared_embedder

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / "data" / "archehr" / "offline_state.json"

NOTE = [NoteSentence("1", "Admission Date: [**2190-2-9**] Discharge Date: [**2190-2-14**]"),
        NoteSentence("2", "History of Present Illness:"),
        NoteSentence("3", "72M with CKD stage 3 and hypertension presenting with two days of weakness and nausea."),
        NoteSentence("4", "He had started ibuprofen for knee pain one week before admission."),
        NoteSentence("5", "Pertinent Results:"),
        NoteSentence("6", "[**2190-2-9**] 04:10PM BLOOD UreaN-58* Creat-3.4* Na-134 K-6.8* HCO3-17*"),
        NoteSentence("7", "ECG: peaked T waves, no arrhythmia."),
        NoteSentence("8", "Brief Hospital Course:"),
        NoteSentence("9", "Hyperkalemia was treated with calcium gluconate, insulin with dextrose and patiromer, and "
                          "potassium fell to 4.9 by the next morning."),
        NoteSentence("10", "Ibuprofen was stopped because NSAIDs reduce kidney blood flow and raise potassium."),
        NoteSentence("11", "Creatinine improved to 2.1 at discharge, near his baseline of 1.9."),
        NoteSentence("12", "Physical therapy evaluated his knee and recommended a cane."),
        NoteSentence("13", "Discharge Medications:"),
        NoteSentence("14", "1. Amlodipine 10 mg PO DAILY"),
        NoteSentence("15", "2. Acetaminophen 650 mg PO Q6H PRN knee pain"),
        NoteSentence("16", "Followup Instructions:"),
        NoteSentence("17", "Nephrology clinic with Dr. ___ in 1 week with a repeat potassium and creatinine.")]
NARRATIVE = ("My dad is 72 and was in the hospital last week. They said his potassium was dangerously high and "
             "his kidneys were worse. How high was his potassium and why did it go up?")


def test_a_lab_value_question_selects_the_lab_line_and_not_the_headers_or_the_medication_list():
    stage = archehr_stage("evidence", "learned")
    pred = stage(f"What was his potassium level and why was it high? {NARRATIVE}", NOTE)
    assert "6" in pred.evidence_ids          # the lab line holding K-6.8
    assert {"9", "10"} & set(pred.evidence_ids)
    headers = {s.id for s in NOTE if s.text.endswith(":")}
    assert not headers & set(pred.evidence_ids)
    assert pred.scores["6"] >= 3 and pred.scores["2"] == 1 and pred.selection == "learned"


def test_the_alignment_links_a_lay_paraphrase_by_its_number_and_drug_class():
    stage = archehr_stage("alignment", "learned")
    answers = [AnswerSentence("1", "His potassium was very high at 6.8 and his kidney function had worsened."),
               AnswerSentence("2", "The anti-inflammatory pain pill he had started was stopped because it harms "
                                   "kidney blood flow."),
               AnswerSentence("3", "By discharge his kidney test had improved to 2.1.")]
    links = {a["answer_id"]: a["evidence_id"] for a in stage(answers, NOTE).alignment}
    assert "6" in links["1"] and "10" in links["2"] and "11" in links["3"]
    assert all(len(v) <= 3 for v in links.values())


def test_claims_are_read_with_units_and_lay_synonyms():
    assert not unsupported_quantities(quantities("almost 1.5 liters drained"), quantities("drainage of 1450 mL"))
    assert unsupported_quantities(quantities("for 25 months"), quantities("for 2 years"))
    assert not unsupported_quantities(quantities("rechecked in 2 to 3 months"), quantities("at 60 to 90 days"))
    assert {"anticoagulant", "blood_thinner"} <= concepts("he needs a blood thinner") & concepts("started apixaban")
    assert "kidney" in concepts("his kidney function") & concepts("Creat-3.4*")
    kinds = layout([s.text for s in NOTE]).kinds
    assert kinds[1] == "header" and kinds[5] == "lab" and kinds[13] == "medication" and kinds[0] == "admin"


def test_the_cascade_anchor_is_split_into_question_and_narrative():
    assert split_anchor("Why was he intubated? My father was sick. Why?") == (
        "Why was he intubated?", "My father was sick. Why?")
    assert split_anchor("Just one sentence") == ("Just one sentence", "Just one sentence")


def _state_with(tmp_path: Path, edit) -> Path:
    data = json.loads(STATE.read_text())
    edit(data)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["stages"]["evidence"]["scorer"]["features"].__setitem__(0, "renamed"), "fitted for feature set"),
    (lambda d: d["stages"]["evidence"].__setitem__("feature_set", "evidence/0"), "fitted for feature set 'evidence/0'"),
    (lambda d: d["stages"]["evidence"].__setitem__("embedder", "another-model"), "fitted with embedder 'another-model'"),
    (lambda d: d.__setitem__("format", "something else"), "not a clinprog offline state"),
    (lambda d: d["stages"].pop("evidence"), "holds no fitted evidence stage"),
    (lambda d: d["stages"]["evidence"]["scorer"].__setitem__("coef", [1.0]), "malformed evidence scorer"),
])
def test_a_state_that_does_not_fit_the_code_is_refused_in_one_line(tmp_path, edit, message):
    path = _state_with(tmp_path, edit)
    with pytest.raises(LearnedStateError) as err:
        archehr_stage("evidence", "learned", f"program.evidence.state_path={path}")
    text = str(err.value)
    assert message in text and "\n" not in text and text.startswith("program.evidence.state_path=")
    assert isinstance(err.value, ClinprogError)  # main.py prints it as one `error:` line


def test_a_missing_state_names_the_key_and_how_to_fit_one(tmp_path):
    with pytest.raises(LearnedStateError, match=r"program.alignment.state_path=.*nope.json: no such file; .*task=compile"):
        archehr_stage("alignment", "learned", f"program.alignment.state_path={tmp_path / 'nope.json'}")


def test_the_shipped_state_loads_and_records_what_it_was_fitted_on():
    data = json.loads(STATE.read_text())
    state = load_stage_state(STATE, "evidence", data["stages"]["evidence"]["feature_set"], EVIDENCE_FEATURES,
                             shared_embedder().name, "program.evidence.state_path")
    assert 0 < state.selection["threshold"] < 1
    meta = data["meta"]
    assert meta["features"]["evidence"]["names"] == list(EVIDENCE_FEATURES)
    assert {"numpy", "scikit-learn", "python"} <= set(meta["libraries"]) and len(meta["train"]["hash"]) == 16


def test_a_configured_threshold_overrides_the_states():
    everything = archehr_stage("evidence", "learned", "program.evidence.threshold=0.0")
    strict = archehr_stage("evidence", "learned", "program.evidence.threshold=1.0", "program.evidence.relative=1.0",
                           "program.evidence.min_selected=1")
    anchor = f"What was his potassium level? {NARRATIVE}"
    assert len(everything(anchor, NOTE).evidence_ids) == sum(not s.text.endswith(":") for s in NOTE)
    assert len(strict(anchor, NOTE).evidence_ids) == 1


def test_compile_fits_the_learned_stages_scores_val_before_and_after_and_saves_the_state(tmp_path, monkeypatch):
    import common.outputs
    from optimizers.offline_fit import compile_offline
    from runners.program import contract_for

    data = ROOT / "data" / "archehr"
    save_to = tmp_path / "compiled" / "offline.json"
    cfg = config("program=archehr", "lm=none", "program/archehr/evidence=learned", "program/archehr/alignment=learned",
                 f"data.train={data / 'dev_cases.xml'}", f"data.train_key={data / 'dev_cases_key.json'}",
                 f"data.val={data / 'bundled_cases.xml'}", f"data.val_key={data / 'bundled_cases_key.json'}",
                 "optimizer.metric=archehr_evidence", f"program.optimize.save_to={save_to}")
    monkeypatch.setattr(common.outputs, "output_dir", lambda: tmp_path)
    contract = contract_for(cfg)
    after = compile_offline(cfg, contract, contract.examples(cfg, "train"), contract.examples(cfg, "val"),
                            embedder=shared_embedder())
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["after"] == after and scores["fitted"] == ["evidence", "alignment"]
    assert "subtask_2_strict_micro_f1" in scores["stages_before"] and "subtask_4_micro_f1" in scores["stages_after"]
    state = json.loads(save_to.read_text())
    assert state["meta"]["train"]["cases"] == 34 and state["meta"]["scores"]["before"] == scores["before"]
    # the saved state is what a run loads
    stage = archehr_stage("evidence", "learned", f"program.evidence.state_path={save_to}")
    assert stage(f"What was his potassium level? {NARRATIVE}", NOTE).evidence_ids


def test_compile_says_when_the_state_in_use_was_fitted_on_the_validation_cases():
    from optimizers.offline_fit import _fitted_on

    cfg = config("program=archehr", "lm=none")  # the shipped state: fitted on the dev and realistic cases
    warning = _fitted_on(cfg, ["evidence", "alignment"], {"1001", "2001", "other"})
    assert warning.startswith("warning:") and "fitted on 2 of the 3 validation cases" in warning
    assert _fitted_on(cfg, ["evidence"], {"other"}) is None
