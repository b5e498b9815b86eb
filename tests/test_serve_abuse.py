"""`task=serve` under abuse, through a toy program whose work is slow on purpose: the HTTP layer (serving/app.py)
served in-process by uvicorn on 127.0.0.1 and called over real sockets (chunked bodies, raw bytes)."""

import logging
import re
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
import httpx
import pytest
import uvicorn
from omegaconf import OmegaConf
from pydantic import BaseModel

from common.contract import ProgramContract
from common.errors import ConfigError
from common.settings import serve_settings
from lms.local_server import free_port
from serving.app import create_app
from serving.protocol import server_args

pytestmark = pytest.mark.integration

SERVING = Path(__file__).resolve().parents[1] / "serving"


@dataclass(frozen=True)
class Job:
    id: str
    seconds: float
    sentences: tuple[str, ...] = ()


class JobRequest(BaseModel):
    id: str = "job"
    seconds: float = 0.0
    sentences: list[str] = []


class JobResponse(BaseModel):
    id: str
    lm_failure: str | None = None
    seconds: float


class SlowProgram(dspy.Module):
    """Sleeps as long as the request says and counts how many of its calls run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.running = self.most = 0
        self.started: list[str] = []

    def forward(self, job: Job) -> dspy.Prediction:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(job.id)
        try:
            time.sleep(job.seconds)
        finally:
            with self.lock:
                self.running -= 1
        return dspy.Prediction(id=job.id)


class NotServed(ProgramContract[Job]):
    """A program that declares no serving: everything else a contract needs, unused here."""

    name = "slow"
    unit = "job"

    def load(self, cfg, split="run"):
        raise NotImplementedError

    def item_id(self, item: Job) -> str:
        return item.id

    def build(self, cfg, role_lms, **resources):
        return SlowProgram()

    def predict(self, program, item: Job) -> dict[str, Any]:
        return {"id": program(job=item).id}

    def write_submission(self, records, out):
        raise NotImplementedError

    def score(self, cfg, inputs, records):
        return None

    def score_files(self, cfg, inputs, path):
        raise NotImplementedError

    def usage(self, records):
        return {}

    def report(self, cfg, usage, scores):
        return ""


class Slow(NotServed):
    serve_verb = "work"

    def serve_schemas(self):
        return JobRequest, JobResponse

    def serve_item(self, request: JobRequest) -> Job:
        return Job(request.id, request.seconds, tuple(request.sentences))

    def serve_response(self, record, lm_failure, seconds):
        return {"id": record["id"], "lm_failure": lm_failure, "seconds": seconds}


class Live:
    """create_app(...) under uvicorn in a thread of this process."""

    def __init__(self, access_log: bool = False, contract: ProgramContract | None = None, **serve: Any) -> None:
        settings = {"host": "127.0.0.1", "max_concurrency": 1, "max_queue": 0, "timeout_s": 0.5,
                    "max_request_bytes": 2000, "max_sentences": 5, "token_env": None, "log_bodies": False, **serve}
        cfg = OmegaConf.create({"serve": settings, "lm": {"client": None}, "program": {"name": "slow"}})
        self.program = SlowProgram()
        self.url = f"http://127.0.0.1:{free_port()}"
        port = int(self.url.rsplit(":", 1)[1])
        args = {**server_args(serve_settings(cfg)), "port": port, "log_config": None,
                "log_level": "info" if access_log else "warning"}
        self.server = uvicorn.Server(uvicorn.Config(create_app(cfg, contract or Slow(), self.program), **args))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the in-process server did not start"
            time.sleep(0.02)

    def post(self, body: dict[str, Any] | None = None, **kwargs: Any) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/slow/work", json=body, timeout=30, **kwargs)

    def health(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def idle(self, within: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while (health := self.health())["in_flight"]:
            assert time.monotonic() < deadline, health
            time.sleep(0.05)
        return health

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live():
    servers: list[Live] = []

    def start(access_log: bool = False, contract: ProgramContract | None = None, **serve: Any) -> Live:
        servers.append(Live(access_log, contract, **serve))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_timed_out_work_keeps_its_slot_until_it_really_ends(live):
    server = live(max_concurrency=1, max_queue=0, timeout_s=0.5)
    slow = server.post({"id": "slow", "seconds": 2.5})
    assert slow.status_code == 504 and "serve.timeout_s=0.5" in slow.json()["error"]
    health = server.health()
    assert health["in_flight"] == 1 and health["running"] == 1 and health["timed_out_running"] == 1
    refused = server.post({"id": "second", "seconds": 0})  # the one worker still computes the timed-out request
    assert refused.status_code == 429 and "busy" in refused.json()["error"]
    assert server.idle()["timed_out_running"] == 0
    assert server.post({"id": "third", "seconds": 0}).status_code == 200
    assert server.program.most == 1 and server.program.started == ["slow", "third"]


def test_a_client_cannot_pile_up_work_beyond_max_concurrency(live):
    server = live(max_concurrency=2, max_queue=16, timeout_s=0.4)
    with ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(lambda i: server.post({"id": f"j{i}", "seconds": 1.5}), range(6)))
    assert [r.status_code for r in responses] == [504] * 6
    server.idle()
    # two ran (and kept their workers past their 504); the four that were still waiting were cancelled, never run
    assert server.program.most == 2 and len(server.program.started) == 2


def chunks(body: bytes, size: int = 500):
    for i in range(0, len(body), size):
        yield body[i: i + size]


def test_a_chunked_body_is_counted_as_it_arrives(live):
    server = live(max_request_bytes=2000)
    small = b'{"id": "small", "sentences": ["a", "b"]}'
    ok = server.post(content=chunks(small, 7), headers={"Content-Type": "application/json"})
    assert ok.status_code == 200 and ok.json()["id"] == "small"
    large = ('{"id": "large", "sentences": [' + ", ".join(['"' + "x" * 90 + '"'] * 100) + "]}").encode()
    assert len(large) > 9000
    r = server.post(content=chunks(large), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "serve.max_request_bytes=2000" in r.json()["error"], r.text
    assert server.program.started == ["small"]


@pytest.mark.parametrize(("content", "message"), [
    (b'{"id": "caf\xe9"}', "the body is not UTF-8 (byte 0xe9 at offset 11)"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"id": 5', "malformed JSON"),
    (b'{"id": "n", "seconds": ' + b"9" * 4301 + b"}", "a number in the body's JSON has more digits than can be read"),
])
def test_undecodable_bodies_are_the_documented_422(live, content, message):
    server = live(max_request_bytes=1_000_000)
    r = server.post(content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and message in r.json()["error"], r.text


def test_every_error_is_an_error_object(live):
    server = live()
    assert httpx.get(f"{server.url}/v1/nowhere").json() == {"error": "Not Found"}
    assert httpx.get(f"{server.url}/v1/slow/work").status_code == 405
    many = server.post({"sentences": ["s"] * 6})
    assert many.status_code == 422 and many.json() == {"error": "sentences: 6 is over serve.max_sentences=5"}


def test_a_list_over_max_sentences_is_refused_before_its_items_are_validated(live):
    """Issue #28 item 1, found again by benchmarks/probe.py: 76,000 sentences were validated one by one on the event
    loop (1.5 s of a blocked /health) before the count refused them. The count comes first now, for any list."""
    server = live(max_request_bytes=1_000_000)
    bad_items = server.post({"sentences": [1] * 6})  # six items that would each fail validation
    assert bad_items.status_code == 422 and bad_items.json() == {"error": "sentences: 6 is over serve.max_sentences=5"}
    nested = server.post({"id": "n", "extra": {"rows": [[0]] * 6}})
    assert nested.status_code == 422 and nested.json() == {"error": "extra.rows: 6 is over serve.max_sentences=5"}
    assert server.post({"sentences": ["s"] * 5}).status_code == 200 and server.program.started == ["job"]


class SlowParse(Slow):
    """A program whose request takes a while to turn into an item (as a 2 MB `xml` body does)."""

    def serve_item(self, request: JobRequest) -> Job:
        time.sleep(1.5)
        return super().serve_item(request)


def test_health_answers_while_a_request_is_turned_into_its_item(live):
    """serve_item runs in a thread: the event loop (and /health) does not wait for a request's parsing."""
    server = live(contract=SlowParse(), timeout_s=5)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(server.post, {"id": "p"})
        time.sleep(0.3)
        asked = time.monotonic()
        assert server.health()["status"] == "ok"
        assert time.monotonic() - asked < 0.5  # 1.2 s before: the parse held the event loop
        assert slow.result().status_code == 200


def test_client_ids_cannot_forge_log_lines(live, caplog):
    server = live()
    caplog.set_level(logging.INFO, logger="clinprog.serve")
    r = server.post({"id": "a\nERROR forged line\r\x1b[31m\u2028"})
    assert r.status_code == 200
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "clinprog.serve"]
    assert len(lines) == 1 and lines[0].startswith(r"job a\nERROR forged line\r\x1b[31m\u2028: 0 sentences")
    assert not any(ch in lines[0] for ch in "\n\r\x1b\u2028")


def test_a_program_without_serving_declarations_is_one_error():
    cfg = OmegaConf.create({"serve": {"max_concurrency": 1, "max_queue": 0}, "lm": {"client": None}})
    with pytest.raises(ConfigError, match=r"^program=slow cannot be served: its contract declares no serve_schemas"):
        create_app(cfg, NotServed(), SlowProgram())


def test_routes_come_from_each_contract_and_keep_the_earlier_urls():
    from programs.archehr.contract import ArchEHRContract
    from programs.archehr2025.contract import ArchEHR2025Contract
    from programs.mediqa_corr.contract import MediqaCorrContract

    assert ArchEHRContract().serve_path() == "/v1/archehr/answer"
    assert (ArchEHR2025Contract().serve_path(), ArchEHR2025Contract.serve_aliases) == (
        "/v1/archehr2025/answer", ("/v1/archehr/answer",))
    assert MediqaCorrContract().serve_path() == "/v1/mediqa_corr/correct"


def test_serving_names_no_program():
    for path in SERVING.glob("*.py"):
        text = path.read_text(encoding="utf-8").lower()
        assert not [name for name in ("archehr", "mediqa", "case_id", "text_id") if name in text], path


def slow_sender(server: Live, length: int = 100_000) -> socket.socket:
    """A connection that sends a request's headers (`Content-Length: length`) and one byte of its body, then holds."""
    sock = socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    sock.sendall(b"POST /v1/slow/work HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n{" % length)
    return sock


def answer(sock: socket.socket, within: float) -> bytes:
    """What the server sends until it closes the connection (b"" when it said nothing; TimeoutError: not closed)."""
    sock.settimeout(within)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    return data


def test_slow_body_senders_are_capped_and_timed_out_while_health_answers(live, caplog):
    caplog.set_level(logging.WARNING)
    server = live(max_request_bytes=200_000, max_connections=1000, max_body_readers=4, read_timeout_s=2)
    start = time.monotonic()
    senders = [slow_sender(server) for _ in range(200)]
    time.sleep(0.2)
    asked = time.monotonic()
    health = httpx.get(f"{server.url}/health", timeout=5)
    assert health.status_code == 200 and time.monotonic() - asked < 1, health.text
    statuses = Counter(answer(sock, within=10).split(b" ", 2)[1] for sock in senders)
    # four bodies were waited for, 408 after serve.read_timeout_s; every other sender was turned away at once
    assert statuses == {b"503": 196, b"408": 4}, statuses
    assert time.monotonic() - start < 8
    assert server.health()["reading_bodies"] == 0
    assert not [r for r in caplog.records if r.exc_info], "a traceback per connection"
    assert server.post({"id": "after"}).status_code == 200


def test_idle_connections_are_closed_and_the_connection_cap_logs_once_per_kind(live, caplog):
    caplog.set_level(logging.WARNING)
    server = live(max_request_bytes=200_000, max_connections=20, max_body_readers=100, read_timeout_s=1)
    port = int(server.url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]  # they never send a byte
    start = time.monotonic()
    assert all(answer(sock, within=5) == b"" for sock in idle)  # closed by the server after serve.read_timeout_s
    assert time.monotonic() - start < 4
    senders = [slow_sender(server) for _ in range(60)]
    refused = [answer(sock, within=5) for sock in senders]
    assert sum(r.startswith(b"HTTP/1.1 503") for r in refused) >= 40  # over serve.max_connections=20
    counts = server.health()["connection_errors"]
    assert counts.get("Exceeded concurrency limit.", 0) >= 40, counts
    said = [r.getMessage() for r in caplog.records if "Exceeded concurrency limit" in r.getMessage()]
    assert 1 <= len(said) <= 3 and said[0].startswith("Exceeded concurrency limit. (logged once"), said
    assert not [r for r in caplog.records if r.exc_info]


def test_a_token_in_the_query_string_is_not_written_to_the_access_log(live, caplog):
    server = live(access_log=True)
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    r = httpx.post(f"{server.url}/v1/slow/work?token=s3cr3t-t0ken&api_key=k3y&s3cr3t-bare", json={"id": "q"})
    assert r.status_code == 200
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "uvicorn.access"]
    # ours first; LiteLLM, when an earlier run in this process imported it, scrubs uvicorn.access after us
    # ("token=[redacted]" -> "REDACTED"): either way every value is gone
    assert lines and re.search(r"/v1/slow/work\?(token=\[redacted\]|REDACTED)&(api_key=\[redacted\]|REDACTED)"
                               r"&(\[redacted\]|REDACTED) ", lines[-1]), lines
    assert not [line for line in lines if "s3cr3t" in line or "k3y" in line], lines


# --- issue #54 ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "where"), [
    (b'{"id": "why \\ud800 stopped?"}', "id: a lone surrogate U+D800 at character 4"),
    (b'{"id": "n", "sentences": ["fine", "\\udfff"]}', "sentences.1: a lone surrogate U+DFFF at character 0"),
    (b'{"id": "n", "extra": {"\\ud83d": 1}}', "extra: a key with a lone surrogate U+D83D"),
])
def test_a_lone_surrogate_in_any_field_is_a_422_before_the_program_sees_it(live, content, where):
    """A `\\ud800` escape decodes to text no tokenizer can encode: it was a 500 with a traceback from inside a
    stage, counted as a connection error in /health. Refused with the other undecodable bodies, for every program."""
    server = live(max_request_bytes=10_000)
    r = server.post(content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"].startswith(where), r.text
    assert server.health()["connection_errors"] == {} and server.program.started == []
    assert server.post({"id": "why \U0001F600 stopped?"}).status_code == 200  # a pair (an emoji) is Unicode text


class Broken(Slow):
    """A program with a bug: its prediction raises what the issue's embedder raised."""

    def predict(self, program, item: Job) -> dict[str, Any]:
        raise TypeError("TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]")


def test_a_bug_in_the_program_is_a_500_error_object_and_not_a_connection_error(live, caplog):
    caplog.set_level(logging.ERROR)
    server = live(contract=Broken())
    r = server.post({"id": "x"})
    assert r.status_code == 500 and r.json() == {"error": "internal error (TypeError): the server's log has the "
                                                          "traceback"}
    assert server.health()["connection_errors"] == {}
    logged = [rec for rec in caplog.records if rec.name == "clinprog.serve" and rec.exc_info]
    assert len(logged) == 1 and "unexpected TypeError" in logged[0].getMessage()


def test_the_bearer_scheme_is_case_insensitive(live, monkeypatch):
    monkeypatch.setenv("CLINPROG_TEST_SERVE_TOKEN", "t0k3n")
    server = live(token_env="CLINPROG_TEST_SERVE_TOKEN")
    for header in ("Bearer t0k3n", "bearer t0k3n", "BEARER  t0k3n"):  # RFC 7235: the scheme is case-insensitive
        assert server.post({"id": "a"}, headers={"Authorization": header}).status_code == 200, header
    for header in ("Basic t0k3n", "bearer t0k3", "bearer", "t0k3n", "Bearer T0K3N", ""):
        assert server.post({"id": "a"}, headers={"Authorization": header}).status_code == 401, header


def test_an_empty_token_never_opens_the_server(monkeypatch):
    """An empty token once meant no Authorization and no Host guard (`Host: evil.example` -> 200)."""
    monkeypatch.setenv("CLINPROG_TEST_SERVE_TOKEN", "")
    with pytest.raises(ConfigError, match="CLINPROG_TEST_SERVE_TOKEN is set but empty"):
        Live(token_env="CLINPROG_TEST_SERVE_TOKEN")


def test_a_body_that_is_not_labelled_json_says_json_is_expected(live):
    server = live()
    r = server.post(content=b'{"id": "a"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 422 and r.json() == {"error": "body: send a JSON object with Content-Type: "
                                                          "application/json (this request's Content-Type: text/plain)"}


def test_sixty_small_requests_at_once_are_all_answered(live):
    """Each request took a body-reader slot while its body was on its way, so 60 small requests at once got 28 x 503
    'requests are still sending their bodies' with no slow client; only a body still arriving after a moment counts."""
    server = live(max_concurrency=4, max_queue=100, timeout_s=20, max_body_readers=4, max_connections=256)
    start = threading.Barrier(60)

    def one(i: int) -> int:
        start.wait()
        return server.post({"id": f"j{i}", "sentences": ["a small body"]}).status_code

    with ThreadPoolExecutor(60) as pool:
        statuses = Counter(pool.map(one, range(60)))
    assert statuses == {200: 60}, statuses
    assert server.idle()["reading_bodies"] == 0


@pytest.mark.parametrize(("host", "status"), [
    ("evil.example", 403), ("evil.example:{port}", 403), ("127.0.0.1.evil.example", 403),
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("LocalHost.:{port}", 200), ("[::1]:{port}", 200),
])
def test_a_token_less_loopback_server_answers_only_its_own_names(live, monkeypatch, host, status):
    """DNS rebinding: a page whose name resolves to 127.0.0.1 would use a token-less server from a visitor's browser,
    its requests naming the page's host. Every path is guarded (the page, /health, the API)."""
    server = live()
    port = server.url.rsplit(":", 1)[1]
    named = {"Host": host.format(port=port)}
    for r in (httpx.get(f"{server.url}/health", headers=named), httpx.get(f"{server.url}/", headers=named),
              server.post({"id": "h"}, headers=named)):
        assert r.status_code == status, (r.request.url, r.text)
        if status == 403:
            assert "DNS rebinding" in r.json()["error"]
    assert server.program.started == ([] if status == 403 else ["h"])
    monkeypatch.setenv("CLINPROG_TEST_SERVE_TOKEN", "t")  # with a token (e.g. behind a proxy) any name is served
    guarded = live(token_env="CLINPROG_TEST_SERVE_TOKEN")
    assert httpx.get(f"{guarded.url}/health", headers={"Host": "evil.example"}).status_code == 200


def test_the_page_has_an_icon(live):
    server = live()
    icon = httpx.get(f"{server.url}/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml" and icon.content.startswith(b"<svg")
    assert '<link rel="icon" href="/favicon.ico"' in httpx.get(f"{server.url}/").text
