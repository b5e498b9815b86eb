"""A program's learnable state (demos, instructions) saves as DSPy JSON and reloads into an identical program."""

import dspy

from programs.archehr import ArchEHRCascade


def test_save_and_load_round_trip(tmp_path, dummy_lm):
    demo = dspy.Example(patient_narrative="N", patient_question="(none)", clinician_question="Q?").with_inputs(
        "patient_narrative", "patient_question")
    program = ArchEHRCascade(question_demos=[demo])
    program.evidence.score.signature = program.evidence.score.signature.with_instructions("Rate sentences.")
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = ArchEHRCascade()
    loaded.load(str(path))
    assert [d["clinician_question"] for d in loaded.question.interpret.demos] == ["Q?"]
    assert loaded.evidence.score.signature.instructions == "Rate sentences."
    assert not hasattr(loaded, "_role_lms") or loaded._role_lms == {}
