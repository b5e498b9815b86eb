"""task=merge of damaged shard folders: a config.json or fingerprint.json that is not the object a run writes, a
record that lacks a field the outputs are made from, a merge into one of its own shards: one `error:` line each,
exit code 2, and nothing written (the old merge said "merged 2 shards: 3 cases" while subtasks 2-4 held one)."""

import json
import shutil

import pytest

from tests.cli import dispatch_run, one_error_line, run_main
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
        proc = dispatch_run(*ARGS, "data.num_shards=2", f"data.shard={k}", f"hydra.run.dir={folder}")
        assert proc.returncode == 0, proc.stderr[-1500:]
    return base, folders


def copy_of(folder, to):
    shutil.copytree(folder, to)
    return to


def merge(*dirs, out, process=False):
    """task=merge of `dirs` into `out` (a real process where Hydra's run-folder callback is the point)."""
    args = ("task=merge", f"dirs=[{','.join(str(d) for d in dirs)}]", f"hydra.run.dir={out}")
    return run_main(*args) if process else dispatch_run(*args)



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
    line = one_error_line(merge(s0, damaged, out=out))
    assert line == f"error: {damaged}/{name}: not the {name} a run writes ({says})"
    assert not (out / "predictions.jsonl").exists()


@pytest.mark.parametrize("name", ["config.json", "fingerprint.json"])
def test_a_shard_file_nested_too_deeply_to_read_is_one_error_naming_it(shards, tmp_path, name):
    """Issue #28 probe: 100,000 `[` in a shard's file was a RecursionError traceback."""
    _, (s0, s1) = shards
    damaged = copy_of(s1, tmp_path / "s1_damaged")
    (damaged / name).write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "merged"
    line = one_error_line(merge(s0, damaged, out=out))
    assert line == f"error: {damaged}/{name}: not JSON (JSON nested too deeply to read)"
    assert not (out / "predictions.jsonl").exists()


def rewrite_first_record(folder, change) -> str:
    path = folder / "predictions.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    change(record)
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    return record["case_id"]


def test_a_record_without_its_answer_and_evidence_is_one_error_naming_shard_and_case(shards, tmp_path):
    _, (s0, s1) = shards
    damaged = copy_of(s1, tmp_path / "s1_damaged")
    case = rewrite_first_record(damaged, lambda r: [r.pop("answer"), r.pop("evidence_ids")])
    out = tmp_path / "merged"
    line = one_error_line(merge(s0, damaged, out=out))
    assert line == (f"error: damaged records: {damaged} (shard 1 of 2) holds 1 of its 2 cases' records without what "
                    f"the outputs are made from (case {case} lacks evidence_ids, answer); delete that line from its "
                    "predictions.jsonl and rerun that shard's command to run them again")
    assert not (out / "predictions.jsonl").exists() and not (out / "submission_subtask_2.json").exists()


def test_a_record_whose_fields_are_of_the_wrong_kind_is_refused_too(shards, tmp_path):
    _, (s0, s1) = shards
    damaged = copy_of(s1, tmp_path / "s1_damaged")
    case = rewrite_first_record(damaged, lambda r: r.update(evidence_ids="1,2", alignment=None))
    line = one_error_line(merge(damaged, s0, out=tmp_path / "merged"))
    assert f"(case {case} evidence_ids is not a list, alignment is not a list)" in line, line


def snapshot(folder) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_merge_into_one_of_its_shards_is_refused_before_anything_is_written(shards):
    _, (s0, s1) = shards
    before = snapshot(s0)
    line = one_error_line(merge(s0, s1, out=s0, process=True))  # refused by Hydra's callback, before Hydra writes
    assert line == (f"error: hydra.run.dir={s0} is the shard folder {s0} of dirs: the merge would overwrite it; "
                    "merge into another folder (omit hydra.run.dir)")
    assert snapshot(s0) == before  # its predictions, outputs, .hydra files and main.log as they were
