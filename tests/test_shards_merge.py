"""Job arrays: `data.num_shards=N data.shard=K` runs the K-th contiguous slice; `task=merge dirs=[...]` makes one run
folder equal to the unsharded run, and refuses a gap, an overlap or a foreign shard with one error line each."""

import json
import logging
import re
import shutil

import pytest
from omegaconf import OmegaConf

from common.errors import ConfigError
from runners.shards import bounds, shard_of
from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"
ARGS = ("program=archehr", "program/archehr/question=baseline", f"data.cases={DEV_CASES}", "data.limit=4",
        "metrics.bertscore=null", "progress=false")
SUBMISSIONS = [f"submission_subtask_{i}.json" for i in (1, 2, 3, 4)]


def untimed(report: str) -> str:
    """report.md without its timings (two runs of the same records differ only there)."""
    lines = [line for line in report.splitlines() if not line.startswith("- seconds per case")]
    return "\n".join(re.sub(r"\| [0-9.]+ \|$", "| - |", line) for line in lines)


def test_slices_are_contiguous_cover_every_item_once_and_differ_by_at_most_one():
    for count in range(12):
        for num in range(1, 6):
            cuts = [bounds(count, k, num) for k in range(num)]
            assert cuts[0][0] == 0 and cuts[-1][1] == count
            assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
            sizes = [stop - start for start, stop in cuts]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(("num", "shard", "says"), [
    (2, 2, "data.shard must be an integer from 0 to 1 (data.num_shards=2), not 2"),
    (2, -1, "data.shard must be an integer from 0 to 1"),
    (0, 0, "data.num_shards must be an integer >= 1 (1: no sharding), not 0"),
    (2, "a", "data.shard must be an integer from 0 to 1 (data.num_shards=2), not 'a'"),
])
def test_a_shard_setting_that_cannot_work_is_one_config_error(num, shard, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        shard_of(OmegaConf.create({"data": {"num_shards": num, "shard": shard}}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The unsharded run and its two shards (2 cases each)."""
    base = tmp_path_factory.mktemp("shards")
    folders = {"full": base / "full", "s0": base / "s0", "s1": base / "s1"}
    procs = {"full": dispatch_run(*ARGS, f"hydra.run.dir={folders['full']}"),
             **{f"s{k}": dispatch_run(*ARGS, "data.num_shards=2", f"data.shard={k}", f"hydra.run.dir={folders[f's{k}']}")
                for k in (0, 1)}}
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, proc.stderr[-1500:])
    return base, folders


def test_each_shard_runs_its_own_contiguous_slice(runs, caplog):
    _, folders = runs
    ids = {name: [json.loads(line)["case_id"] for line in (folder / "predictions.jsonl").read_text().splitlines()]
           for name, folder in folders.items()}
    assert ids["s0"] + ids["s1"] == ids["full"] and len(ids["s0"]) == len(ids["s1"]) == 2
    caplog.set_level(logging.INFO)  # the shard's rerun (nothing left to run) logs its slice, as main.log has it
    again = dispatch_run(*ARGS, "data.num_shards=2", "data.shard=1", f"hydra.run.dir={folders['s1']}")
    assert again.returncode == 0 and "data.shard=1 of data.num_shards=2: cases 3-4 of 4" in caplog.text


def test_two_merged_shards_equal_the_unsharded_run(runs):
    base, folders = runs
    out = base / "merged"
    proc = dispatch_run("task=merge", f"dirs=[{folders['s1']},{folders['s0']}]", f"hydra.run.dir={out}")  # any order
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert f"merged 2 shards: 4 cases; outputs: {out}" in proc.stdout
    for name in SUBMISSIONS:
        assert (out / name).read_bytes() == (folders["full"] / name).read_bytes(), name
    assert json.loads((out / "scores.json").read_text()) == json.loads((folders["full"] / "scores.json").read_text())
    assert untimed((out / "report.md").read_text()) == untimed((folders["full"] / "report.md").read_text())
    merged = [json.loads(line)["case_id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    full = [json.loads(line)["case_id"] for line in (folders["full"] / "predictions.jsonl").read_text().splitlines()]
    assert merged == full
    assert (out / "fingerprint.json").read_text() == (folders["full"] / "fingerprint.json").read_text()
    config = json.loads((out / "config.json").read_text())
    assert config["data"]["num_shards"] == 1 and config["data"]["shard"] == 0 and config["choices"]["task"] == "run"


def test_a_gap_an_overlap_and_a_foreign_shard_are_one_error_line_each(runs):
    base, folders = runs
    twin = base / "s0_again"
    shutil.copytree(folders["s0"], twin)
    foreign = base / "s1_other_seed"
    shutil.copytree(folders["s1"], foreign)
    fingerprint = json.loads((foreign / "fingerprint.json").read_text())
    fingerprint["seed"] = 7  # a shard of another configuration
    (foreign / "fingerprint.json").write_text(json.dumps(fingerprint))
    out = base / "refused"
    proc = dispatch_run("task=merge", f"dirs=[{folders['s0']},{twin},{foreign}]", f"hydra.run.dir={out}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines), proc.stderr
    assert lines[0] == f"error: {foreign} is a shard of another run than {folders['s0']} (fingerprint.seed: 0 -> 7)"
    assert lines[1].startswith("error: an overlap: shard 0 of 2 is in 2 folders") and str(twin) in lines[1]
    assert lines[2] == "error: a gap: shard 1 of 2 (cases 3-4 of 4) is in none of dirs; run it (data.shard=1) and " \
                       "merge again"
    assert not (out / "predictions.jsonl").exists()


def test_a_shard_missing_a_case_is_a_gap_naming_it(runs):
    base, folders = runs
    partial = base / "s1_partial"
    shutil.copytree(folders["s1"], partial)
    lines = (partial / "predictions.jsonl").read_text().splitlines(keepends=True)
    (partial / "predictions.jsonl").write_text(lines[0])
    lost = json.loads(lines[1])["case_id"]
    proc = dispatch_run("task=merge", f"dirs=[{folders['s0']},{partial}]", f"hydra.run.dir={base / 'refused2'}")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: a gap: {partial} (shard 1 of 2) lacks 1 of its 2 cases ({lost}): rerun that "
                                   "shard's command to resume it")


def test_merge_without_dirs_says_how(tmp_path):
    proc = dispatch_run("task=merge", f"hydra.run.dir={tmp_path / 'm'}")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: task=merge needs dirs=[RUN0,RUN1,...]")
