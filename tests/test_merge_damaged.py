"""task=merge of damaged shard folders: a config.json or fingerprint.json that is not the object a run writes, a
record that lacks a field the outputs are made from, a merge into one of its own shards: one `error:` line each,
exit code 2, and nothing written (the old merge said "merged 2 shards: 3 cases" while subtasks 2-4 held one)."""

import json
import shutil

import pytest

from tests.cli import run_main
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"
ARGS = ("program=archehr", "program/archehr/question=baseline", f"data.cases={DEV_CASES}", "data.limit=4",
        "metrics.bertscore=null", "progress=false")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two shards of a 4-case run (2 cases each)."""
    base = tmp_path_factory.mktemp("merge_damaged")
    folders = [base / f"s{k}" for k in (0, 1)]
    for k, folder in enumerate(folders):
        proc = run_main(*ARGS, "data.num_shards=2", f"data.shard={k}", f"hydra.run.dir={folder}")
        assert proc.returncode == 0, proc.stderr[-1500:]
    return base, folders


def copy_of(folder, to):
    shutil.copytree(folder, to)
    return to


def merge(*dirs, out):
    return run_main("task=merge", f"dirs=[{','.join(str(d) for d in dirs)}]", f"hydra.run.dir={out}")


def one_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize(("name", "content", "says"), [
    ("config.json", [], "a JSON array, not an object"),
    ("config.json", "x", "a JSON string, not an object"),
    ("config.json", {"data": "x"}, "its data is a JSON string, not an object"),
    ("config.json", {"data": {}}, "no program object"),
    ("config.json", {"data": {}, "program": {"name": "archehr"}}, "its program names no contract object"),
    ("fingerprint.json", [1], "a JSON array, not an object"),
    ("fingerprint.json", {"inputs": "x"}, "its inputs are a JSON string, not an object"),
])
def test_a_shard_file_that_is_not_what_a_run_writes_is_one_error_naming_it(shards, tmp_path, name, content, says):
    _, (s0, s1) = shards
    damaged = copy_of(s1, tmp_path / "s1_damaged")
    (damaged / name).write_text(json.dumps(content))
    out = tmp_path / "merged"
    line = one_error(merge(s0, damaged, out=out))
    assert line == f"error: {damaged}/{name}: not the {name} a run writes ({says})"
    assert not (out / "predictions.jsonl").exists()
