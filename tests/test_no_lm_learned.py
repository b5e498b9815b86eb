"""The learned non-LLM stages: what they select and link on small notes, their saved state (refused when it does not
fit the code), and task=compile fitting them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from common.errors import ClinprogError
from common.parameters import LearnedStateError
from programs.archehr.evidence.features import EVIDENCE_FEATURES
from programs.archehr.shared.claims import quantities, unsupported_quantities
from programs.archehr.shared.clinical_lexicon import concepts
from programs.archehr.shared.note_layout import layout
from tasks.archehr.data import AnswerSentence, NoteSentence
from tests.builders import archehr_stage, config, program, shared_embedder

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / "data" / "archehr" / "compiled_program.json"

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
    pred = stage("What was his potassium level and why was it high?", NARRATIVE, NOTE)
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


def _state_with(tmp_path: Path, edit) -> Path:
    data = json.loads(STATE.read_text())
    edit(data)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["evidence.scorer"]["features"].__setitem__(0, "renamed"), "new here: ['"),
    (lambda d: d["evidence.scorer"].__setitem__("feature_set", "evidence/0"), "fitted for feature set 'evidence/0'"),
    (lambda d: d["evidence.scorer"].__setitem__("embedder", "another-model"), "fitted with embedder 'another-model'"),
    (lambda d: d["evidence.scorer"].__setitem__("format", "something else"), "not a 'clinprog-logistic/1' state"),
    (lambda d: d.pop("evidence.scorer"), "holds no evidence.scorer"),
    (lambda d: d["evidence.scorer"].__setitem__("coef", [1.0]), "must hold"),
    (lambda d: d["evidence.scorer"].__setitem__("scale", [0.0] * len(d["evidence.scorer"]["scale"])), "scale of 0"),
    (lambda d: d["evidence.scorer"].__setitem__("selection", [1, 2, 3]), "selection must map names"),
    (lambda d: d["evidence.scorer"]["selection"].__setitem__("threshold", "abc"), "selection must map names"),
    (lambda d: d["evidence.scorer"].__setitem__("coef", []), "must hold"),
])
def test_a_state_that_does_not_fit_the_code_is_refused_in_one_line(tmp_path, edit, message):
    path = _state_with(tmp_path, edit)
    with pytest.raises(ClinprogError) as err:
        program("archehr", "lm=none", "program/archehr/question=baseline", f"program.compiled={path}")
    text = str(err.value)
    assert message in text and "\n" not in text and text.startswith(f"program.compiled={path}")


def test_a_missing_or_unreadable_state_is_one_line(tmp_path):
    with pytest.raises(ClinprogError, match=r"program.compiled=.*nope.json: no such file"):
        program("archehr", "lm=none", f"program.compiled={tmp_path / 'nope.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text(STATE.read_text())
    (tmp_path / "bad.json.meta.json").write_text("{not json")
    with pytest.raises(ClinprogError, match=r"bad.json.meta.json: not JSON"):
        program("archehr", "lm=none", "program/archehr/question=baseline", f"program.compiled={bad}")


def test_no_compiled_program_leaves_the_learned_heads_unfitted_and_says_so_when_they_run():
    stage = program("archehr", "lm=none", "program/archehr/question=baseline", "program.compiled=null").evidence
    with pytest.raises(LearnedStateError, match=r"program.evidence \(learned\): its scorer is not fitted.*optimizer=logistic"):
        stage("What was his potassium level?", NARRATIVE, NOTE)


def test_the_shipped_state_is_the_default_compiled_program_and_round_trips_through_save():
    built = program("archehr", "lm=none", "program/archehr/question=baseline")
    assert built.evidence.scorer.fitted and built.alignment.scorer.fitted
    assert 0 < built.evidence.scorer.selection["threshold"] < 1
    state = built.dump_state()
    assert {"evidence.scorer", "alignment.scorer"} <= set(state)
    assert state["evidence.scorer"]["features"] == list(EVIDENCE_FEATURES)
    fresh = program("archehr", "lm=none", "program/archehr/question=baseline", "program.compiled=null")
    fresh.load_state({k: v for k, v in state.items()})
    assert np.allclose(fresh.evidence.scorer.coef, built.evidence.scorer.coef)


def test_a_configured_threshold_overrides_the_fitted_one():
    everything = archehr_stage("evidence", "learned", "program.evidence.threshold=0.0")
    strict = archehr_stage("evidence", "learned", "program.evidence.threshold=1.0", "program.evidence.relative=1.0",
                           "program.evidence.min_selected=1")
    question = "What was his potassium level?"
    assert len(everything(question, NARRATIVE, NOTE).evidence_ids) == sum(not s.text.endswith(":") for s in NOTE)
    assert len(strict(question, NARRATIVE, NOTE).evidence_ids) == 1


@pytest.mark.parametrize("override", ["program.evidence.threshold=abc", "program.evidence.min_selected=abc",
                                      "program.evidence.threshold=7", "program.evidence.min_selected=-1"])
def test_a_selection_override_out_of_range_is_one_config_line(override):
    with pytest.raises(ClinprogError, match=override.split("=")[0]):
        archehr_stage("evidence", "learned", override)


def test_the_logistic_optimizer_fits_the_heads_with_dspys_compile_shape(tmp_path):
    from common.contract import contract_for
    from common.program_state import load_compiled, save_compiled
    from optimizers.logistic import LogisticFit

    data = ROOT / "data" / "archehr"
    cfg = config("program=archehr", "lm=none", "program/archehr/question=baseline",
                 f"data.train={data / 'dev_cases.xml'}", f"data.train_key={data / 'dev_cases_key.json'}")
    contract = contract_for(cfg)
    student = contract.build(cfg, None, embedder=shared_embedder())
    # 10 of the 34 dev cases: the fit's shape and saving are the point here (the full fit: experiment=compile_heads)
    compiled = LogisticFit(c=0.3).compile(student, trainset=contract.examples(cfg, "train")[:10])
    assert compiled is not student and compiled.evidence.scorer.fit["cases"] == 10
    assert compiled.evidence.scorer.fit["case_ids"][0] == "1001"
    assert not (compiled.evidence.scorer.coef == student.evidence.scorer.coef).all()  # the student is untouched
    path = save_compiled(compiled, tmp_path / "heads.json", {"scores": {}})
    again = load_compiled(contract.build(cfg.copy(), None, embedder=shared_embedder()), path)
    assert np.allclose(again.alignment.scorer.coef, compiled.alignment.scorer.coef, atol=1e-7)


def test_the_logistic_optimizer_refuses_a_key_without_answer_sentences(tmp_path):
    from common.contract import contract_for
    from optimizers.logistic import LogisticFit

    data = ROOT / "data" / "archehr"
    key = json.loads((data / "dev_cases_key.json").read_text())
    for case in key:
        case.pop("clinician_answer_sentences", None)
    (tmp_path / "k.json").write_text(json.dumps(key))
    cfg = config("program=archehr", "lm=none", "program/archehr/question=baseline",
                 f"data.train={data / 'dev_cases.xml'}", f"data.train_key={tmp_path / 'k.json'}")
    contract = contract_for(cfg)
    try:
        trainset = contract.examples(cfg, "train")
    except ClinprogError:
        return  # the key loader already refuses it in one line
    with pytest.raises(ClinprogError, match="clinician_answer_sentences"):
        LogisticFit().compile(contract.build(cfg, None, embedder=shared_embedder()), trainset=trainset)


def test_a_state_that_fails_on_its_last_parameter_leaves_every_earlier_one_as_it_was(tmp_path):
    from common.program_state import load_compiled

    built = program("archehr", "lm=none", "program/archehr/question=baseline", "program.compiled=null")
    assert not built.evidence.scorer.fitted
    order = [name for name, _ in built.named_parameters()]
    assert order.index("evidence.scorer") < order.index("alignment.scorer")  # the last one fails below
    path = _state_with(tmp_path, lambda d: d["alignment.scorer"].__setitem__("coef", [1.0]))
    with pytest.raises(ClinprogError, match="must hold"):
        load_compiled(built, path)
    assert not built.evidence.scorer.fitted  # nothing half-loaded
    assert load_compiled(built, STATE).evidence.scorer.fitted and built.alignment.scorer.fitted
