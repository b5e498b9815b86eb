"""`executor=ray` against a real local Ray (2 workers) with the non-LLM ArchEHR program: the same outputs as a local
run, a killed driver resumes, a killed worker (during that resumed run) loses only its cases in flight,
`lm.rate_limit` holds for all workers together (measured at a recording OpenAI-compatible server), Ctrl-C stops the
cluster's work; and Hydra's Ray launcher for sweeps."""

import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from tests.cli import dispatch_run, main_command, run_main
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

pytest.importorskip("ray", reason='executor=ray needs Ray: pip install -e ".[ray]"')

DEV_CASES = ROOT / "data" / "archehr" / "dev_cases.xml"
# the baseline question stage: where cases run is the point here, and each Ray worker builds its own program
# and each case embeds its own sentences (program.embedder.cache=false): with the vectors kept from an earlier run a
# resumed run's cases take milliseconds, and the killed worker would have none in flight
ARGS = ("program=archehr", "program/archehr/question=baseline", f"data.cases={DEV_CASES}", "metrics.bertscore=null",
        "progress=false", "program.embedder.cache=false")
RAY = ("executor=ray", "executor.num_workers=2")
SUBMISSIONS = [f"submission_subtask_{i}.json" for i in (1, 2, 3, 4)]


def start(*args):
    # SIGINT as a terminal gives it, even when pytest itself runs as a background job (`&` in a script ignores it,
    # and a child inherits that)
    return subprocess.Popen(main_command(*ARGS, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(condition, timeout=300, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def case_ids(folder):
    return [json.loads(line)["case_id"] for line in lines(folder / "predictions.jsonl")]


def worker_pids(folder):
    return [int(pid) for pid in re.findall(r"ray worker \d+: pid (\d+) ", "\n".join(lines(folder / "main.log")))]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_same_outputs(folder, reference):
    for name in SUBMISSIONS:
        assert (folder / name).read_bytes() == (reference / name).read_bytes(), name
    assert json.loads((folder / "scores.json").read_text()) == json.loads((reference / "scores.json").read_text())
    assert sorted(case_ids(folder)) == sorted(case_ids(reference))  # every case once


CASES = 12  # enough that the resumed run still has cases in flight on both workers when one of them is killed


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The local executor's run of the first 12 dev cases: what every Ray run must equal."""
    folder = tmp_path_factory.mktemp("local") / "run"
    proc = dispatch_run(*ARGS, f"data.limit={CASES}", f"hydra.run.dir={folder}")  # in process: no Ray in this one
    assert proc.returncode == 0, proc.stderr[-1500:]
    return folder


def test_a_killed_driver_resumes_on_ray_and_a_killed_worker_loses_only_its_cases_in_flight(local_run, tmp_path):
    """kill -9 of the driver, then its rerun resumes on Ray; during the rerun one worker is killed: its cases in
    flight go back to the queue once and a fresh worker takes its place; the run writes what a local run writes."""
    folder = tmp_path / "ray"
    # the killed driver's Ray has one worker (the executor is not part of the fingerprint: its rerun, with two, resumes)
    driver = start(f"data.limit={CASES}", "executor=ray", "executor.num_workers=1", f"hydra.run.dir={folder}")
    wait_for(lambda: len(case_ids(folder)) >= 2, what="two saved cases")
    driver.kill()  # kill -9: no cleanup of any kind
    driver.communicate(timeout=60)
    saved = case_ids(folder)

    again = start(f"data.limit={CASES}", *RAY, f"hydra.run.dir={folder}")
    # the rerun's two workers (the killed run's one is logged before them), then one more saved case
    pids = wait_for(lambda: len(worker_pids(folder)) >= 3 and worker_pids(folder)[-2:], what="the rerun's workers")
    wait_for(lambda: len(case_ids(folder)) > len(saved), what="a case saved by the rerun")
    os.kill(pids[0], signal.SIGKILL)
    try:
        _, stderr = again.communicate(timeout=600)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, stderr[-1500:]
    log = (folder / "main.log").read_text()
    assert "taking over a stale lock" in log and f"resuming: {len(saved)} cases already in" in log
    assert case_ids(folder)[: len(saved)] == saved  # the saved cases did not run again
    assert re.search(rf"ray worker 0 \(pid {pids[0]} on .*\) died \(.*\): its items in flight go back to the queue "
                     r"once; a fresh worker takes its place", log), log[-2000:]
    assert re.search(r"ray worker 0 replaced: pid \d+ on ", log)
    # the resumed Ray run writes what a local run writes and says where it ran
    assert_same_outputs(folder, local_run)
    assert (folder / "fingerprint.json").read_text() == (local_run / "fingerprint.json").read_text()
    assert "executor=ray: 2 workers x 1 thread(s) on a local Ray started for this run (2 CPUs, " in log
    assert len(set(pids)) == 2 and os.getpid() not in pids
    survivors = [int(pid) for pid in re.findall(r"ray worker \d+ replaced: pid (\d+) ", log)] + pids[1:]
    wait_for(lambda: not any(alive(pid) for pid in survivors), timeout=30, what="the local Ray to stop with the run")
    assert "Token authentication" not in stderr and "Traceback" not in stderr


class RecordingOpenAI(http.server.ThreadingHTTPServer):
    """An OpenAI-compatible server that answers `{}` after 0.5 s and records when each request came and went."""

    def __init__(self):
        self.requests: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - /v1/models
                self._send({"object": "list", "data": [{"id": "m"}]})

            def do_POST(self):  # noqa: N802
                came = time.monotonic()
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(0.5)
                self._send({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "{}"}}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
                with server.lock:
                    server.requests.append((came, time.monotonic()))

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def api_base(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def count(self):
        with self.lock:
            return len(self.requests)

    def most_at_once(self):
        with self.lock:
            spans = list(self.requests)
        return max(sum(a < end and start < b for a, b in spans) for start, end in spans)


def test_the_rate_limit_holds_for_all_workers_together_and_ctrl_c_stops_the_cluster_work(tmp_path):
    server = RecordingOpenAI()
    folder = tmp_path / "ray"
    driver = None
    try:
        driver = start("data.limit=4", *RAY, "lm=openai_compatible", "lm.client.model=m",
                       f"lm.client.api_base={server.api_base}", "lm.client.cache=false", "lm.client.num_retries=0",
                       "lm.rate_limit.rpm=6", f"hydra.run.dir={folder}")
        wait_for(lambda: server.count() >= 6, what="6 requests")
        first = server.requests[0][0]
        time.sleep(5)  # both workers still have cases that need more requests: the shared quota holds them back
        assert server.count() == 6 and time.monotonic() - first < 55
        assert server.most_at_once() >= 2  # the two workers' requests ran at the same time
        pids = worker_pids(folder)
        assert len(pids) == 2 and "lm.rate_limit rpm=6 tpm=None shared by all workers" in (folder / "main.log").read_text()
        driver.send_signal(signal.SIGINT)
        _, stderr = driver.communicate(timeout=120)
        assert driver.returncode == 130, stderr[-1500:]
        assert re.match(r"interrupted: \d cases saved in (.*); to resume, rerun the same command with hydra.run.dir=\1$",
                        stderr.strip().splitlines()[-1]), stderr[-1500:]
        wait_for(lambda: not any(alive(pid) for pid in pids), timeout=30, what="the workers to stop")
        time.sleep(2)
        assert server.count() == 6  # no request after Ctrl-C
    finally:
        server.shutdown()
        if driver is not None and driver.poll() is None:  # a failed check above: no driver (nor its local Ray) outlives the test
            driver.kill()


def test_a_two_job_sweep_runs_on_hydras_ray_launcher(tmp_path):
    pytest.importorskip(
        "hydra_plugins.hydra_ray_launcher",
        reason="hydra-ray-launcher is not installed: its newest release (1.2.2) pins cloudpickle<3 while dspy 3.4 needs "
               "cloudpickle>=3.1.2, so pip cannot install it beside clinprog; `pip install --no-deps "
               "hydra-ray-launcher==1.2.2` (its local launcher needs only ray and hydra-core) enables this test")
    sweep = tmp_path / "sweep"
    proc = run_main("-m", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                    "+hydra.launcher.ray.init.include_dashboard=false", *ARGS, "data.limit=2",
                    "program/archehr/evidence=embedding", "program.evidence.top_share=0.2,0.9",
                    f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    objectives = [json.loads((sweep / str(i) / "scores.json").read_text())["objective"] for i in (0, 1)]
    assert objectives[0] != objectives[1]  # the two jobs ran different configurations
    configs = [json.loads((sweep / str(i) / "config.json").read_text())["program"]["evidence"]["top_share"]
               for i in (0, 1)]
    assert configs == [0.2, 0.9]
