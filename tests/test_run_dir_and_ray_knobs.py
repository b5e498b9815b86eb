"""A run folder that cannot be one (under a file, under /proc) and executor.* values that cannot work: one `error:`
line each and exit code 2, before anything runs (no traceback, no silent default: num_workers=0 once ran 2)."""

import pytest

from runners.executors.ray_executor import ray_settings
from tests.cli import run_main

pytestmark = pytest.mark.unit

ARGS = ("program=archehr", "program/archehr/question=baseline", "data.limit=1")


def one_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


def test_a_run_folder_under_a_file_is_one_error_line(tmp_path):
    a_file = tmp_path / "somefile"
    a_file.write_text("x")
    line = one_error(run_main(*ARGS, f"hydra.run.dir={a_file / 'sub'}", quiet=True))
    assert line == f"error: hydra.run.dir={a_file / 'sub'}: {a_file} is a file, not a folder; choose a folder for " \
                   "the run's outputs"
    assert a_file.read_text() == "x"


@pytest.mark.parametrize("folder", ["/proc/clinprog-run", "/proc"])
def test_a_run_folder_that_cannot_be_written_is_one_error_line(folder):
    line = one_error(run_main(*ARGS, f"hydra.run.dir={folder}", quiet=True))
    assert line.startswith(f"error: hydra.run.dir={folder}: cannot create or write that folder ("), line


def test_a_sweep_folder_under_a_file_is_one_error_line(tmp_path):
    a_file = tmp_path / "somefile"
    a_file.write_text("x")
    line = one_error(run_main("-m", *ARGS, f"hydra.sweep.dir={a_file / 'm'}", quiet=True))
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
    line = one_error(run_main(*ARGS, "executor=ray", override, f"hydra.run.dir={tmp_path / 'run'}", quiet=True))
    assert line == f"error: {says}"
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_valid_ray_settings_are_used_as_given():
    given = {"address": None, "num_workers": 3, "cpus_per_worker": 0.5, "object_store_mb": 100}
    assert ray_settings(**given) == given
