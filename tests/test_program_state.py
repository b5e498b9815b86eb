"""A program's learnable state (demos, instructions) saves as DSPy JSON and reloads into an identical program."""

import json

import dspy
import pytest

from tests.builders import program as build_program

pytestmark = pytest.mark.unit


def test_save_and_load_round_trip(tmp_path, dummy_lm):
    demo = dspy.Example(patient_narrative="N", patient_question="(none)", clinician_question="Q?").with_inputs(
        "patient_narrative", "patient_question")
    program = build_program("archehr", role_lms={"question": dspy.utils.DummyLM([])})
    program.question.interpret.demos = [demo]
    program.evidence.score.signature = program.evidence.score.signature.with_instructions("Rate sentences.")
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = build_program("archehr")
    loaded.load(str(path))
    assert [d["clinician_question"] for d in loaded.question.interpret.demos] == ["Q?"]
    assert loaded.evidence.score.signature.instructions == "Rate sentences."
    # LMs are runtime resources: the role LM the program was built with is not in the saved state
    state = json.loads(path.read_text())
    assert [state[k]["lm"] for k in ("question.interpret", "evidence.score", "answer.generate", "alignment.align")] \
        == [None] * 4
    assert loaded._role_lms == {}


def test_word_limits_in_instructions_come_from_the_config_that_enforces_them(dummy_lm):
    program = build_program("archehr", "program.question.max_words=7", "program.answer.max_words=40")
    instructions = program.question.interpret.signature.instructions
    assert "at most 7 words" in instructions and "15" not in instructions
    assert program.question.interpret.signature.output_fields["clinician_question"].json_schema_extra["desc"] \
        == "one clinician question, at most 7 words"
    assert "at most 40 words" in program.answer.generate.signature.instructions
    dummy_lm([{"clinician_question": "one two three four five six seven eight nine ten"}])
    out = program.question(patient_narrative="Why?")
    assert out.clinician_question == "one two three four five six seven"


def test_a_save_killed_or_stopped_midway_leaves_no_temporary_file_beside_save_to(tmp_path, dummy_lm):
    """kill -9 during a compile's save left `.heads.json.tmp.json` beside save_to (issue 69)."""
    from common.program_state import save_compiled

    program = build_program("archehr", role_lms={"question": dspy.utils.DummyLM([])})
    path = tmp_path / "heads.json"
    stale = [tmp_path / ".heads.json.tmp.json", tmp_path / ".heads.json.tmp.json.meta.json"]
    for left in stale:  # what a killed save leaves
        left.write_text("{")
    save_compiled(program, path, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heads.json", "heads.json.meta.json"]
    saved = path.read_bytes()

    def stopped(where: str) -> None:  # Ctrl-C after the state's temporary copy is written
        open(where, "w").write("{")
        raise KeyboardInterrupt

    program.save = stopped
    with pytest.raises(KeyboardInterrupt):
        save_compiled(program, path, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heads.json", "heads.json.meta.json"]
    assert path.read_bytes() == saved


def test_a_knob_left_null_shows_the_fitted_value_its_state_holds_nested_parts_too(tmp_path):
    from common.program_state import fitted_knobs

    state = tmp_path / "state.json"
    state.write_text(json.dumps({"evidence.scorer": {"selection": {"threshold": 0.375}},
                                 "_grounding.verifier.weights": {"selection": {"threshold": 0.42}},
                                 "metadata": {"dependency_versions": {}}}))
    config = {"program": {"compiled": str(state), "evidence": {"threshold": None, "relative": 0.5},
                          "grounding": {"verifier": {"threshold": None}}}}
    shown = fitted_knobs(config)["program"]
    assert shown["evidence"] == {"threshold": "fitted: 0.375", "relative": 0.5}  # a value the user set stays
    assert shown["grounding"]["verifier"]["threshold"] == "fitted: 0.42"


def test_a_compile_of_one_part_may_start_from_a_state_without_that_parts_weights(tmp_path):
    from common.errors import ClinprogError
    from common.parameters import LogisticHead
    from common.program_state import load_compiled

    class TwoHeads(dspy.Module):
        def __init__(self):
            super().__init__()
            self.kept, self.new = LogisticHead("kept/1", ("a",)), LogisticHead("new/1", ("a",))

    source = TwoHeads()
    source.kept.set([0.0], [1.0], [2.0], 0.5)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"kept": source.kept.dump_state()}))
    with pytest.raises(ClinprogError, match="holds no new"):
        load_compiled(TwoHeads(), state)  # a run needs every part's weights
    loaded = load_compiled(TwoHeads(), state, fitting=["new"])  # a compile fitting `new` starts without them
    assert loaded.kept.fitted and loaded.kept.coef.tolist() == [2.0] and not loaded.new.fitted
    with pytest.raises(ClinprogError, match="holds no new"):
        load_compiled(TwoHeads(), state, fitting=["ne"])  # a part's name, not a prefix of it
    # what every contract's build calls: only a compile's `only` parts may be missing
    from omegaconf import OmegaConf

    from common.program_state import load_program_state

    def cfg(task: str, only: list[str] | None) -> object:
        return OmegaConf.create({"task": {"_target_": f"runners.program.{task}"}, "program": {"compiled": str(state)},
                                 "optimizer": {"teleprompter": None if only is None else {"only": only}}})

    assert not load_program_state(TwoHeads(), cfg("compile_task", ["new"])).new.fitted
    for refused in (cfg("run", ["new"]), cfg("compile_task", None)):
        with pytest.raises(ClinprogError, match="holds no new"):
            load_program_state(TwoHeads(), refused)
