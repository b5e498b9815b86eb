"""Compile with a DummyLM: demos are bootstrapped, saved as JSON, reloaded, and reproduce the predictions."""

import json

import dspy
import pytest

from common.contract import contract_for
from common.errors import ConfigError
from common.program_state import CompiledProgramError, load_compiled, save_compiled
from programs.archehr.objectives import archehr_case_metric, archehr_evidence_metric
from programs.mediqa_corr.objectives import describe_mediqa, mediqa_note_metric
from runners.compile import build_optimizer, program_metric, run_optimizer, with_feedback
from signatures.constrained import ConstrainedJSONAdapter
from tasks.archehr.data import load_cases
from tests.builders import config, program
from tests.conftest import BUNDLED_CASES, BUNDLED_KEY

pytestmark = pytest.mark.unit

# Keyed by a field marker of each stage's input message (DummyLM returns the first key found in the prompt).
SCRIPT = {
    "answer_sentences ##": {"citations": [["4", "5"], ["6"], ["7", "8"]]},
    "evidence ##": {"answer": "Troponin rose. ST depressions appeared."},
    "note_sentences ##": {"scores": [1, 2, 2, 5, 5, 5, 3, 1, 1, 1]},
    "patient_narrative ##": {"clinician_question": "Why was catheterization chosen over a stress test?"},
}


@pytest.mark.parametrize("name", ["none", "bootstrap", "bootstrap_rs", "mipro", "gepa"])
def test_build_optimizer_builds_each_config_the_runner_uses(name):
    cfg = config(f"optimizer={name}")
    contract = contract_for(cfg)
    metric = program_metric(cfg, contract)
    assert metric is archehr_case_metric
    with dspy.context(lm=dspy.utils.DummyLM([])):  # MIPROv2 and GEPA's default reflection LM need a configured LM
        optimizer = build_optimizer(cfg, contract, metric)
    if name == "none":
        assert optimizer is None
        return
    assert type(optimizer).__name__ == cfg.optimizer.teleprompter._target_.split(".")[-1]
    if name == "gepa":
        # the reflective branch: textual feedback from the program's feedback() and a reflection LM
        assert optimizer.reflection_lm is not None
        from tasks.archehr.data import load_key

        case = load_cases(BUNDLED_CASES)[0]
        gold = dspy.Example(case=case, key=load_key(BUNDLED_KEY)["901"], clinician_question="Why?").with_inputs("case")
        pred = dspy.Prediction(clinician_question="Why?", evidence_ids=["4"], answer=None)
        out = optimizer.metric_fn(gold, pred)
        assert out.score == pytest.approx(1.0) and "essential evidence ids: ['4', '5', '6']" in out.feedback


def test_unknown_optimizer_metric_is_one_config_error():
    cfg = config("optimizer=bootstrap", "optimizer.metric=mediqa_note")
    with pytest.raises(ConfigError, match=r"optimizer.metric must be one of \['archehr_case', 'archehr_evidence', "
                                          r"'archehr_question'\] for program=archehr"):
        program_metric(cfg, contract_for(cfg))


def test_bootstrap_compile_save_reload_reproduces_predictions(tmp_path, bundled_cases):
    from tasks.archehr.data import load_key

    key = load_key(BUNDLED_KEY)
    case = bundled_cases[0]
    example = dspy.Example(case=case, key=key[case.case_id], clinician_question=case.clinician_question).with_inputs("case")
    lm = dspy.utils.DummyLM(SCRIPT, adapter=ConstrainedJSONAdapter())
    dspy.configure(lm=lm, adapter=ConstrainedJSONAdapter())
    try:
        assert archehr_evidence_metric(example, program("archehr")(case=case)) == 1.0
        optimizer = dspy.BootstrapFewShot(metric=archehr_evidence_metric, max_bootstrapped_demos=1, max_labeled_demos=0)
        student = program("archehr")
        assert len(student.question.curated_demos) == 3  # the public dev pairs of program.question.demo_ids
        assert not getattr(student, "_compiled", False)  # the shipped learned weights loaded: not a compile
        compiled = run_optimizer(optimizer, student, [example], [])
        assert compiled._compiled  # a compiled program says so, as DSPy's teleprompters mark theirs
        demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
        assert demos == {"question.interpret": 1, "evidence.score": 1, "answer.generate": 1, "alignment.align": 1}
        # BootstrapFewShot starts from reset_copy(), which empties predictor demos: the curated ones survive
        assert len(compiled.question.curated_demos) == 3

        path = save_compiled(compiled, tmp_path / "archehr.json", {"scores": {"before": 1.0, "after": 1.0}})
        state = json.loads(path.read_text())  # DSPy JSON state, not pickle
        assert state["evidence.score"]["demos"][0]["scores"] == [1, 2, 2, 5, 5, 5, 3, 1, 1, 1]
        meta = json.loads((tmp_path / "archehr.json.meta.json").read_text())
        assert meta["program"] == "ArchEHRCascade" and meta["dspy_version"] == dspy.__version__

        reloaded = load_compiled(program("archehr"), path)
        a, b = compiled(case=case), reloaded(case=case)
        for field in ("clinician_question", "evidence_ids", "answer", "alignment"):
            assert a[field] == b[field]
        question_prompt = lm.history[-4]["messages"]
        # system + 3 curated demos (user/assistant pairs) + 1 bootstrapped demo + the question
        assert len(question_prompt) == 1 + 2 * (3 + 1) + 1
        align_prompt = lm.history[-1]["messages"]
        assert len(align_prompt) == 1 + 2 * 1 + 1  # the bootstrapped demo travels with the reloaded program
    finally:
        dspy.configure(lm=None, adapter=None)


def test_loading_a_program_compiled_for_another_signature_fails_clearly(tmp_path):
    path = save_compiled(program("archehr"), tmp_path / "a.json", {})
    with pytest.raises(CompiledProgramError, match="compiled for ArchEHRCascade.*this is MedReActNMedReFlex"):
        load_compiled(program("mediqa_corr"), path)
    with pytest.raises(CompiledProgramError, match="no such file"):
        load_compiled(program("archehr"), tmp_path / "missing.json")


def test_state_saved_with_one_fallback_setting_loads_with_the_other(tmp_path):
    seed = program("archehr", "stages=lm", "program/archehr/fallback=seed")
    seed.evidence.score.demos = [dspy.Example(clinician_question="q", note_sentences="[1] a", scores=[5])]
    path = save_compiled(seed, tmp_path / "seed.json", {})
    state = json.loads(path.read_text())
    # the no-LM fallback modules (a plain dict) are not learnable state: the same four predictors either way
    assert sorted(k for k in state if k != "metadata") == [
        "alignment.align", "answer.generate", "evidence.score", "question.interpret"]
    with_fallbacks = load_compiled(program("archehr", "stages=lm", "program/archehr/fallback=no_lm"), path)
    assert with_fallbacks.evidence.score.demos[0]["scores"] == [5]
    assert set(with_fallbacks._no_lm) == {"question", "evidence", "answer", "alignment"}
    assert [n for n, _ in with_fallbacks.named_predictors()] == [n for n, _ in seed.named_predictors()]


def test_mediqa_note_metric_and_gepa_feedback():
    from tasks.mediqa_corr.data import Note
    from tasks.mediqa_corr.submission import Correction, no_error

    note = Note("ms-1", "t", (("0", "a"), ("1", "b")), 1, 1, "b", "He takes vancomycin.")
    ex = dspy.Example(note=note).with_inputs("note")
    exact = dspy.Prediction(correction=Correction("ms-1", 1, 1, "He takes vancomycin."))
    assert mediqa_note_metric(ex, exact) == pytest.approx(1.0, abs=1e-6)
    assert mediqa_note_metric(ex, dspy.Prediction(correction=no_error("ms-1"))) == 0.0
    assert mediqa_note_metric(ex, dspy.Prediction(correction=Correction("ms-1", 1, 0, "He takes vancomycin."))) == 0.0
    fb = with_feedback(mediqa_note_metric, describe_mediqa)(ex, dspy.Prediction(correction=no_error("ms-1")))
    assert fb.score == 0.0 and "reference correction is 'He takes vancomycin.'" in fb.feedback


def test_optimizer_fit_refuses_a_program_without_a_learned_part_in_one_line():
    from optimizers.fit_learned import FitLearned

    with pytest.raises(Exception) as err:
        FitLearned().compile(dspy.Module(), trainset=[])
    assert "no learned part to fit" in str(err.value) and "\n" not in str(err.value)
