"""lm=openai_compatible against a real `python -m llama_cpp.server` (the packaged SmolLM2 GGUF, 127.0.0.1).

The per-case JSON schema of every stage must reach the server in the form it accepts (`json_object` + `schema` for
llama.cpp's server), be honoured (parse success 1.0, no fallbacks), and faults must end in one line."""

import json
import subprocess
import threading
import time

import pytest

from lms.local_server import MODEL_ALIAS, LlamaServer, RecordingProxy
from tests.cli import QUIET, dispatch_run, main_command
from tests.conftest import ROOT

pytestmark = [pytest.mark.lm, pytest.mark.server]


@pytest.fixture(scope="module")
def llama_server():
    """The module's server. The killed-mid-run test kills it and starts it again on the same port; the timeout test
    runs last: the server goes on computing the reply a timed-out run gave up on (~10 s of its CPU), and the teardown
    stops it instead."""
    server = LlamaServer().start()
    yield server
    server.stop()


def server_args(api_base, tmp_path):
    return ("lm=openai_compatible", f"lm.client.api_base={api_base}", f"lm.client.model={MODEL_ALIAS}",
            f"cache_dir={tmp_path / 'cache'}")


def test_archehr_case_through_the_server_with_per_case_schemas(llama_server, tmp_path):
    proxy = RecordingProxy(llama_server.api_base)
    try:
        out = tmp_path / "run"
        proc = dispatch_run("program=archehr", "data.limit=1", *server_args(proxy.api_base, tmp_path), f"hydra.run.dir={out}",
                            quiet=True)
    finally:
        proxy.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    usage = json.loads((out / "usage.json").read_text())
    assert usage["parse_success_rate"] == {"question": 1.0, "evidence": 1.0, "answer": 1.0, "alignment": 1.0}
    assert usage["fallbacks"] == {} and usage["lm_calls_per_case"] == 4
    assert all(s["input_tokens"] > 0 for name, s in usage["stages"].items() if name != "grounding")
    formats = [body["response_format"] for body in proxy.bodies]
    assert len(formats) == 4 and all(f["type"] == "json_object" and "schema" in f for f in formats)
    evidence = next(f["schema"]["properties"]["scores"] for f in formats if "scores" in f["schema"]["properties"])
    assert evidence["minItems"] == evidence["maxItems"] == 10 and evidence["items"]["enum"] == [1, 2, 3, 4, 5]
    align = next(f["schema"]["properties"]["citations"] for f in formats if "citations" in f["schema"]["properties"])
    assert align["items"]["items"]["enum"] == [str(i) for i in range(1, 11)]
    # per-stage reply bounds (program.reply_tokens): question 96, evidence 32 + 4 x 10 sentences, answer 320,
    # alignment 32 + 3 reference answer sentences x (4 + 6 x 3 citations)
    assert sorted(body["max_tokens"] for body in proxy.bodies) == sorted([96, 72, 320, 32 + 3 * 22])
    record = json.loads((out / "predictions.jsonl").read_text())
    assert set(record["evidence_ids"]) <= {str(i) for i in range(1, 11)} and len(record["answer"].split()) <= 75


def test_mediqa_note_through_the_server(llama_server, tmp_path):
    out = tmp_path / "run"
    proc = dispatch_run("program=mediqa_corr", "data.limit=1", "program.search.enabled=false", "program.react.max_steps=1",
                        "program.reflexion.max_episodes=1", *server_args(llama_server.api_base, tmp_path),
                        f"hydra.run.dir={out}", quiet=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "predictions.jsonl").read_text())
    assert record["parse_failures"] == 0 and record["react_steps"] == 1
    assert (out / "submission.txt").read_text().startswith("ms-val-0 ")


def test_a_wrong_model_name_lists_the_servers_models(llama_server, tmp_path):
    proc = dispatch_run("program=archehr", "lm=openai_compatible", f"lm.client.api_base={llama_server.api_base}",
                        "lm.client.model=gpt-99", f"hydra.run.dir={tmp_path}", quiet=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: lm=openai_compatible: the server at {llama_server.api_base} does not "
                                   f"serve model 'gpt-99'; it serves ['{MODEL_ALIAS}'] (set lm.client.model)")


def test_server_killed_mid_run_keeps_finished_cases_and_the_rerun_resumes(llama_server, tmp_path):
    server = llama_server  # this module's server: killed, then started again on its port
    out = tmp_path / "run"
    # two cases, the evidence stage on the server (one LM call a case, the shortest prompt of the four: ~550 tokens
    # against the question stage's ~820 with its demos; the four-stage cascade through the server is the test above),
    # the question taken from the message (baseline): the first case is saved, the server dies during the second
    args = ("program=archehr", "data.limit=2", *server_args(server.api_base, tmp_path), "lm.client.num_retries=0",
            "stages=no_lm", "program/archehr/question=baseline", "program/archehr/evidence=lm",
            f"hydra.run.dir={out}")
    proc = subprocess.Popen(main_command(*args, *QUIET), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    predictions = out / "predictions.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not (predictions.exists() and predictions.read_text().count("\n") >= 1):
        time.sleep(0.2)
    server.stop()  # killed by PID while the next case runs
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2, stderr[-1500:]
    assert stderr.strip().splitlines()[-1].startswith("error: lm=openai_compatible (127.0.0.1:")
    saved = predictions.read_text().count("\n")
    assert saved >= 1 and (out / "usage.json").is_file() and (out / "report.html").is_file()
    server.start()
    again = dispatch_run(*args, quiet=True)
    assert again.returncode == 0, again.stderr[-1500:]
    ids = [json.loads(line)["case_id"] for line in predictions.read_text().splitlines()]
    assert ids == ["901", "902"] and len(ids) == len(set(ids)) == 2


def test_timeout_is_honoured_and_a_busy_server_is_not_dead(llama_server, tmp_path):
    import httpx

    from lms.factory import check_server

    def long_request():
        # ~6,000 prompt tokens (n_ctx 8192): seconds of reading on any CPU (a short prompt's reply could end before the check
        # below); this client gives up after 3 s, and the module's teardown (this is its last test) drops the rest
        try:
            httpx.post(f"{llama_server.api_base}/chat/completions", timeout=3, json={
                "model": MODEL_ALIAS, "messages": [{"role": "user", "content": "word " * 6000}], "max_tokens": 1})
        except httpx.HTTPError:
            pass

    busy = threading.Thread(target=long_request)
    busy.start()
    time.sleep(1.0)
    check_server(llama_server.api_base, MODEL_ALIAS, timeout=1.0)  # busy reading a prompt: no "no server" error
    assert busy.is_alive()  # it was busy when it answered
    start = time.monotonic()
    proc = dispatch_run("program=archehr", "data.limit=1", *server_args(llama_server.api_base, tmp_path),
                        "lm.client.timeout=0.5", "lm.client.num_retries=0", "lm.client.check=false",
                        f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    busy.join()
    assert proc.returncode == 2 and "Timeout" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert time.monotonic() - start < 120
