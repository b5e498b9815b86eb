"""`run.resume=restart` sets the earlier run's outputs aside together, before the first new record: killed halfway or
stopped by its LM check, it never leaves old scores, submissions or reports beside new predictions."""

import json
import os
import signal
import subprocess
import sys
import time

from common.run_folder import RunFolder
from lms.local_server import free_port
from tasks.archehr.data import load_cases
from tests.conftest import ROOT

DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"
OLD_OUTPUTS = ("predictions.jsonl", "fingerprint.json", "scores.json", "usage.json", "config.json", "report.md",
               "report.html", "submission_subtask_1.json", "submission_subtask_2.json", "submission_subtask_3.json",
               "submission_subtask_4.json")


def main(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), *args, "progress=false", "metrics.bertscore=null"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(main(*args), capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def earlier_run(out) -> dict[str, bytes]:
    """A finished offline run of two bundled cases in `out`: every output file and its bytes."""
    first = run("data.limit=2", f"hydra.run.dir={out}")
    assert first.returncode == 0, first.stderr[-1500:]
    return {name: (out / name).read_bytes() for name in OLD_OUTPUTS}


def assert_set_aside_together(out, old: dict[str, bytes]) -> None:
    for name in old:
        if name not in ("predictions.jsonl", "fingerprint.json"):
            assert not (out / name).exists(), f"{name} of the earlier run is still beside the new predictions"
    [previous] = list((out / "previous").iterdir())
    assert {name: (previous / name).read_bytes() for name in old} == old
    assert (previous / ".hydra" / "overrides.yaml").read_text().count("data.limit=2") == 1  # its own config too


def test_restart_moves_every_output_of_the_earlier_run_together(tmp_path):
    old = {name: f"{name} of the earlier run\n".encode() for name in OLD_OUTPUTS}
    old["fingerprint.json"] = json.dumps({"program": {"threshold": 1}}).encode()
    for name, data in old.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "notes.txt").write_text("the user's own file")
    with RunFolder(tmp_path, {"program": {"threshold": 2}}, resume="restart") as folder:
        assert not folder.predictions.exists()
    [previous] = list((tmp_path / "previous").iterdir())
    assert {p.name: p.read_bytes() for p in previous.iterdir()} == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fingerprint.json", "notes.txt", "previous"]
    assert json.loads((tmp_path / "fingerprint.json").read_text()) == {"program": {"threshold": 2}}


def test_a_restart_killed_after_its_first_records_leaves_no_old_outputs(tmp_path):
    out = tmp_path / "run"
    old = earlier_run(out)
    proc = subprocess.Popen(main(f"data.cases={DEV_CASES}", "run.resume=restart", f"hydra.run.dir={out}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    predictions = out / "predictions.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (predictions.exists() and predictions.read_bytes().count(b"\n") >= 1
                                               and predictions.read_bytes() != old["predictions.jsonl"]):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL  # 34 cases: killed long before the end
    assert_set_aside_together(out, old)
    new_ids = {json.loads(line)["case_id"] for line in predictions.read_text().splitlines()}
    assert new_ids and new_ids <= {case.case_id for case in load_cases(DEV_CASES)}


def test_a_restart_stopped_by_its_lm_check_leaves_no_old_outputs(tmp_path):
    out = tmp_path / "run"
    old = earlier_run(out)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = run("lm=openai_compatible", f"lm.client.api_base={dead}", "lm.client.num_retries=0", "run.resume=restart",
               f"cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={out}")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert_set_aside_together(out, old)
    assert not (out / "predictions.jsonl").exists()
