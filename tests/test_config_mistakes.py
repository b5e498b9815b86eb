"""A command line Hydra cannot compose (a mistyped key, group or option) is one `error:` line naming the closest
valid one, not Hydra's multi-line message that advises `+key=...` (which would add the typo as a new key)."""

import os

import pytest

from tests.cli import composition_error, dispatch_run, run_main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("args", "line"), [
    (["program.evidnce.threshold=0.4"],
     "error: program.evidnce.threshold: no such key in the config; did you mean program.evidence.threshold?"),
    (["prgram=archehr"], "error: prgram: no such key in the config; did you mean program?"),
    (["lm=gemeni"], "error: lm=gemeni: conf/lm/ has no gemeni.yaml; did you mean lm=gemini? options: embedded, "
                    "embedded_gemma, embedded_qwen, gemini, none, openai, openai_compatible"),
    (["program=archehr2026"], "error: program=archehr2026: conf/program/ has no archehr2026.yaml; did you mean "
                              "program=archehr2025? options: archehr, archehr2025, mediqa_corr"),
    (["program/archehr/evidnce=lm"],
     "error: program/archehr/evidnce: no such config group; did you mean program/archehr/evidence?"),
    (["a=b=c"], "error: cannot read the command line: mismatched input '=' expecting <EOF>"),
    # task and executor are config groups (conf/task/, conf/executor/) whose options are _target_s
    (["task=nope"], "error: task=nope: conf/task/ has no nope.yaml; options: compile, evaluate, index, merge, report, "
                    "run, search, serve, sweep_report"),
    (["run.executor=ray"], "error: run.executor: no such key in the config; executor is a config group: executor=ray"),
    (["executor=rays"], "error: executor=rays: conf/executor/ has no rays.yaml; did you mean executor=ray? options: "
                        "local, ray"),
])
def test_a_mistyped_key_group_or_option_is_one_line_naming_the_closest(args, line):
    assert composition_error(*args) == line
    assert "+" not in line.split("did you mean", 1)[-1]  # never advises adding the typo as a new key


def test_the_command_line_prints_a_mistake_as_its_one_line(tmp_path):
    """`main.cli()`: the line above is all of stderr, exit 2, no run folder, HYDRA_FULL_ERROR not left set."""
    proc = run_main("lm=gemeni", f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": None})
    assert proc.returncode == 2 and proc.stderr == composition_error("lm=gemeni") + "\n", proc.stderr
    assert not (tmp_path / "run").exists() and "HYDRA_FULL_ERROR" not in os.environ


def test_an_override_nested_too_deeply_to_parse_is_one_line(tmp_path):
    """benchmarks/probe.py: `+x=[[[...]]]` 300 levels deep was Hydra's RecursionError traceback."""
    proc = run_main("+x=" + "[" * 300 + "]" * 300, f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": None})
    assert proc.returncode == 2
    assert proc.stderr == "error: +x: a value nested 300 levels deep; the command line takes at most 32\n", proc.stderr
    assert not (tmp_path / "run").exists()


def test_hydra_full_error_set_by_the_user_still_gives_hydras_own_error(tmp_path):
    proc = run_main("lm=gemeni", f"hydra.run.dir={tmp_path / 'run'}", env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 1 and "MissingConfigException" in proc.stderr


@pytest.mark.parametrize(("override", "line"), [
    ("task._target_=runners.nope.run", "error: task._target_=runners.nope.run: not a function clinprog can import "
                                       "(ModuleNotFoundError(\"No module named 'runners.nope'\"))"),
    ("executor._target_=nope.Nope", "error: executor._target_=nope.Nope: not a class clinprog can import "
                                    "(ModuleNotFoundError(\"No module named 'nope'\"))"),
])
def test_a_target_that_cannot_be_imported_is_one_line(override, line, tmp_path):
    proc = dispatch_run("program=archehr", "data.limit=1", override, f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr


@pytest.mark.parametrize(("override", "line"), [
    ("~program.module", "error: program.module is missing: it names the program's dspy.Module; drop the override of "
                        "program.module (each program=<name> sets its own)"),
    ("program.module=null", "error: program.module is missing: it names the program's dspy.Module; drop the override "
                            "of program.module (each program=<name> sets its own)"),
    ("program.module._target_=os.system", "error: program.module._target_=os.system: Target 'os.system' is "
                                          "blocklisted because it allows config data to control executable behavior "
                                          "or belongs to an execution-capable target family. It cannot be authorized "
                                          "with HYDRA_INSTANTIATE_ALLOWLIST_OVERRIDE; drop the override of "
                                          "program.module (each program=<name> sets its own)"),
])
@pytest.mark.parametrize("program", ["archehr", "mediqa_corr"])
def test_the_program_module_removed_or_blocked_is_one_line(override, line, program, tmp_path):
    """Each was a traceback (issue 69): Key 'module' is not in struct, 'NoneType' has no named_predictors, Hydra's
    blocklist."""
    extra = ["program.search.enabled=false", "lm=embedded"] if program == "mediqa_corr" else []
    proc = dispatch_run(f"program={program}", *extra, "data.limit=1", override, f"hydra.run.dir={tmp_path / 'run'}",
                        quiet=True)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr[-2000:]


def test_a_builders_knob_is_named_from_the_root_of_the_config(tmp_path):
    """`program.embedder.threads=0` was refused as `embedder.threads`, a key the user cannot type."""
    proc = dispatch_run("program=archehr", "program.embedder.threads=0", "data.limit=1", f"hydra.run.dir={tmp_path}",
                        quiet=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: program.embedder.threads must be an integer from 1 to 256 (or auto), not 0"
