"""Compile with a DummyLM: demos are bootstrapped, saved as JSON, reloaded, and reproduce the predictions."""

import json

import dspy
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from optimizers.compile import CompiledProgramError, load_compiled, run_optimizer, save_compiled
from optimizers.metrics import METRICS, archehr_evidence_metric, mediqa_note_metric, with_feedback
from programs.archehr import ArchEHRCascade
from programs.mediqa_corr import MedReActNMedReFlex
from signatures.constrained import ConstrainedJSONAdapter
from tests.conftest import BUNDLED_KEY, ROOT

# Keyed by a field marker of each stage's input message (DummyLM returns the first key found in the prompt).
SCRIPT = {
    "answer_sentences ##": {"citations": [["4", "5"], ["6"], ["7", "8"]]},
    "evidence ##": {"answer": "Troponin rose. ST depressions appeared."},
    "note_sentences ##": {"scores": [1, 2, 2, 5, 5, 5, 3, 1, 1, 1]},
    "patient_narrative ##": {"clinician_question": "Why was catheterization chosen over a stress test?"},
}


@pytest.mark.parametrize("name", ["none", "bootstrap", "bootstrap_rs", "mipro", "gepa"])
def test_every_optimizer_config_composes_and_builds(name):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"optimizer={name}"])
    assert cfg.optimizer.metric == "archehr_case" and cfg.optimizer.metric in METRICS
    if cfg.optimizer.teleprompter:
        extra = {"reflection_lm": dspy.utils.DummyLM([])} if name == "gepa" else {}
        metric = with_feedback(METRICS["archehr_case"]) if cfg.optimizer.get("feedback") else METRICS["archehr_case"]
        with dspy.context(lm=dspy.utils.DummyLM([])):  # MIPROv2 needs a configured LM to be built
            optimizer = instantiate(cfg.optimizer.teleprompter, metric=metric, **extra)
        assert hasattr(optimizer, "compile")


def test_bootstrap_compile_save_reload_reproduces_predictions(tmp_path, bundled_cases):
    from tasks.archehr.data import load_key

    key = load_key(BUNDLED_KEY)
    case = bundled_cases[0]
    example = dspy.Example(case=case, key=key[case.case_id], clinician_question=case.clinician_question).with_inputs("case")
    lm = dspy.utils.DummyLM(SCRIPT, adapter=ConstrainedJSONAdapter())
    dspy.configure(lm=lm, adapter=ConstrainedJSONAdapter())
    try:
        assert archehr_evidence_metric(example, ArchEHRCascade()(case=case)) == 1.0
        optimizer = dspy.BootstrapFewShot(metric=archehr_evidence_metric, max_bootstrapped_demos=1, max_labeled_demos=0)
        compiled = run_optimizer(optimizer, ArchEHRCascade(), [example], [])
        demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
        assert demos == {"question.interpret": 1, "evidence.score": 1, "answer.generate": 1, "alignment.align": 1}

        path = save_compiled(compiled, tmp_path / "archehr.json", {"scores": {"before": 1.0, "after": 1.0}})
        state = json.loads(path.read_text())  # DSPy JSON state, not pickle
        assert state["evidence.score"]["demos"][0]["scores"] == [1, 2, 2, 5, 5, 5, 3, 1, 1, 1]
        meta = json.loads((tmp_path / "archehr.json.meta.json").read_text())
        assert meta["program"] == "ArchEHRCascade" and meta["dspy_version"] == dspy.__version__

        reloaded = load_compiled(ArchEHRCascade(), path)
        a, b = compiled(case=case), reloaded(case=case)
        for field in ("clinician_question", "evidence_ids", "answer", "alignment"):
            assert a[field] == b[field]
        prompt = lm.history[-1]["messages"]
        assert len(prompt) > 2  # the demo travels with the reloaded program's prompt
    finally:
        dspy.configure(lm=None, adapter=None)


def test_loading_a_program_compiled_for_another_signature_fails_clearly(tmp_path):
    path = save_compiled(ArchEHRCascade(), tmp_path / "a.json", {})
    with pytest.raises(CompiledProgramError, match="compiled for ArchEHRCascade.*this is MedReActNMedReFlex"):
        load_compiled(MedReActNMedReFlex(), path)
    with pytest.raises(CompiledProgramError, match="no such file"):
        load_compiled(ArchEHRCascade(), tmp_path / "missing.json")


def test_mediqa_note_metric_and_gepa_feedback():
    from tasks.mediqa_corr.data import Note
    from tasks.mediqa_corr.submission import Correction, no_error

    note = Note("ms-1", "t", (("0", "a"), ("1", "b")), 1, 1, "b", "He takes vancomycin.")
    ex = dspy.Example(note=note).with_inputs("note")
    exact = dspy.Prediction(correction=Correction("ms-1", 1, 1, "He takes vancomycin."))
    assert mediqa_note_metric(ex, exact) == pytest.approx(1.0, abs=1e-6)
    assert mediqa_note_metric(ex, dspy.Prediction(correction=no_error("ms-1"))) == 0.0
    assert mediqa_note_metric(ex, dspy.Prediction(correction=Correction("ms-1", 1, 0, "He takes vancomycin."))) == 0.0
    from optimizers.metrics import describe_mediqa

    fb = with_feedback(mediqa_note_metric, describe_mediqa)(ex, dspy.Prediction(correction=no_error("ms-1")))
    assert fb.score == 0.0 and "reference correction is 'He takes vancomycin.'" in fb.feedback
