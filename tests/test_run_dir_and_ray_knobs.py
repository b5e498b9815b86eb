"""A run folder that cannot be one (under a file, under /proc: Hydra's callback refuses it, so a real process) and
executor.* values that cannot work: one `error:` line each and exit code 2, before anything runs (no traceback, no
silent default: num_workers=0 once ran 2); an executor whose workers build the program (Ray's) gets none built by the
driver."""

import pytest

from runners.executors.ray_executor import ray_settings
from tests.cli import dispatch_run, one_error_line, run_main

pytestmark = pytest.mark.unit

ARGS = ("program=archehr", "program/archehr/question=baseline", "data.limit=1")



def test_a_run_folder_under_a_file_is_one_error_line(tmp_path):
    a_file = tmp_path / "somefile"
    a_file.write_text("x")
    line = one_error_line(run_main(*ARGS, f"hydra.run.dir={a_file / 'sub'}", quiet=True))
    assert line == f"error: hydra.run.dir={a_file / 'sub'}: {a_file} is a file, not a folder; choose a folder for " \
                   "the run's outputs"
    assert a_file.read_text() == "x"


@pytest.mark.parametrize("folder", ["/proc/clinprog-run", "/proc"])
def test_a_run_folder_that_cannot_be_written_is_one_error_line(folder):
    line = one_error_line(run_main(*ARGS, f"hydra.run.dir={folder}", quiet=True))
    assert line.startswith(f"error: hydra.run.dir={folder}: cannot create or write that folder ("), line


def test_a_sweep_folder_under_a_file_is_one_error_line(tmp_path):
    a_file = tmp_path / "somefile"
    a_file.write_text("x")
    line = one_error_line(run_main("-m", *ARGS, f"hydra.sweep.dir={a_file / 'm'}", quiet=True))
    assert line.startswith(f"error: hydra.sweep.dir={a_file / 'm'}: {a_file} is a file, not a folder"), line


@pytest.mark.parametrize(("override", "says"), [
    ("executor.num_workers=abc", "executor.num_workers must be an integer >= 1, not 'abc'"),
    ("executor.num_workers=0", "executor.num_workers must be an integer >= 1, not 0"),
    ("executor.num_workers=1.5", "executor.num_workers must be an integer >= 1, not 1.5"),
    ("executor.cpus_per_worker=abc", "executor.cpus_per_worker must be a number of CPUs > 0, not 'abc'"),
    ("executor.cpus_per_worker=0", "executor.cpus_per_worker must be a number of CPUs > 0, not 0"),
    ("executor.object_store_mb=abc", "executor.object_store_mb must be an integer >= 75, not 'abc'"),
    ("executor.object_store_mb=10", "executor.object_store_mb must be an integer >= 75, not 10"),
])
def test_a_ray_setting_that_cannot_work_is_one_error_line(tmp_path, override, says):
    line = one_error_line(dispatch_run(*ARGS, "executor=ray", override, f"hydra.run.dir={tmp_path / 'run'}", quiet=True))
    assert line == f"error: {says}"
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_valid_ray_settings_are_used_as_given():
    given = {"address": None, "num_workers": 3, "cpus_per_worker": 0.5, "object_store_mb": 100}
    assert ray_settings(**given) == given


class WorkersBuildTheirOwn:
    """A user's own executor (`executor._target_=...`) whose 'workers' build the program from the config, as Ray's
    ProgramWorker does; it records what the driver handed it."""

    builds_own_program = True
    seen: list = []

    def __init__(self, cfg, unit: str = "item") -> None:
        self.cfg = cfg

    def run(self, todo, run_one, save, num_threads):
        from common.contract import contract_for
        from runners.dspy_setup import build_predictor

        WorkersBuildTheirOwn.seen.append(run_one)
        contract = contract_for(self.cfg)
        predict = build_predictor(self.cfg, contract, contract.lm_roles(self.cfg))
        for item in todo:
            save(item, predict(item))


def test_an_executor_whose_workers_build_the_program_gets_none_from_the_driver(tmp_path, monkeypatch):
    import runners.program
    from runners.dspy_setup import built_by_workers

    def no_build_in_the_driver(*args, **kwargs):
        raise AssertionError("the driver built the program")

    monkeypatch.setattr(runners.program, "build_predictor", no_build_in_the_driver)
    out = tmp_path / "run"
    proc = dispatch_run(*ARGS, f"executor._target_={__name__}.WorkersBuildTheirOwn", f"hydra.run.dir={out}", quiet=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert WorkersBuildTheirOwn.seen == [built_by_workers] and (out / "submission_subtask_2.json").is_file()
    with pytest.raises(RuntimeError, match="workers run the items"):
        built_by_workers(object())
