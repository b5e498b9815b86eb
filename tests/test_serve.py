"""`task=serve` started as a user starts it, on 127.0.0.1, called with an HTTP client: every endpoint, every error
class, concurrent requests (an LM failure answered by the documented fallback: test_serve_in_process.py)."""

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import BUNDLED_CASES
from tests.serve_helpers import Server

pytestmark = pytest.mark.integration

TOKEN = "test-token-123"
NOTE = [{"id": "1", "text": "HOSPITAL COURSE:"},
        {"id": "2", "text": "Lisinopril was held because of hypotension and acute kidney injury."},
        {"id": "3", "text": "Her creatinine improved to 1.1 by discharge."}]


@pytest.fixture(scope="module")
def archehr(tmp_path_factory):
    # the baseline question stage: these tests time the server's limits against 1 s, which the learned question
    # model (~0.9 s a message) would use up on its own (its answers are tested in test_question_stage.py)
    server = Server("program=archehr", "program/archehr/question=baseline", "serve.max_concurrency=1",
                    "serve.max_queue=1", "serve.timeout_s=1",
                    "serve.max_request_bytes=400000", f"hydra.run.dir={tmp_path_factory.mktemp('serve')}",
                    env={"CLINPROG_SERVE_TOKEN": TOKEN})
    yield server
    server.stop()


def post(server, path, body=None, content=None, token=TOKEN, timeout=60):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if content is not None:
        headers["Content-Type"] = "application/json"
    return httpx.post(server.url + path, json=body, content=content, headers=headers, timeout=timeout)


def test_answer_health_and_openapi(archehr):
    r = post(archehr, "/v1/archehr/answer", {"case_id": "c1", "patient_narrative": "Why was my lisinopril stopped?",
                                             "sentences": NOTE})
    assert r.status_code == 200, r.text
    data = r.json()
    question = data["clinician_question"]  # the baseline question stage's: the message's question
    assert data["case_id"] == "c1" and "lisinopril" in question.lower() and question.endswith("?")
    assert len(question.split()) <= 15
    assert data["question_candidates"] is None  # the baseline stage writes one question (test_page: the learned one's)
    assert "2" in data["evidence_ids"] and "1" not in data["evidence_ids"] and data["lm_failure"] is None
    # the default (non-LLM) run answers with note sentences: no grounding check to run (program/archehr/grounding=none)
    assert data["grounding"] is None and data["usage"]["evidence"]["lm_calls"] == 0
    health = httpx.get(archehr.url + "/health").json()
    assert health["status"] == "ok" and health["program"] == "archehr" and health["lm"] == "none"
    assert health["stages"] == {"question": "baseline", "evidence": "learned", "answer": "extractive",
                                "alignment": "learned"}  # the options the served program was built with
    spec = httpx.get(archehr.url + "/openapi.json").json()
    assert "/v1/archehr/answer" in spec["paths"]
    assert "question_candidates" in spec["components"]["schemas"]["ArchEHRResponse"]["properties"]


def test_the_official_xml_of_one_case_is_accepted(archehr):
    xml = BUNDLED_CASES.read_text()
    start = xml.index('<case id="902">')
    one = "<annotations>" + xml[start: xml.index("</case>", start) + len("</case>")] + "</annotations>"
    r = post(archehr, "/v1/archehr/answer", {"xml": one})
    assert r.status_code == 200, r.text
    assert r.json()["case_id"] == "902" and r.json()["alignment"]


@pytest.mark.parametrize(("body", "content", "token", "status", "message"), [
    (None, b"{bad", TOKEN, 422, "malformed JSON at character 1"),
    ({"sentences": NOTE}, None, TOKEN, 422, "body: give patient_narrative (with sentences or note) or xml"),
    ({"patient_narrative": "q", "sentences": [{"id": "1", "text": "a"}, {"id": "1", "text": "b"}]}, None, TOKEN,
     422, "duplicate ids ['1']"),
    ({"patient_narrative": "q", "sentences": [{"id": "1"}]}, None, TOKEN, 422, "sentences.0.text: Field required"),
    ({"xml": "<annotations><case id='1'>"}, None, TOKEN, 422, "xml: request: malformed XML"),
    ({"xml": "<!DOCTYPE x [<!ENTITY a 'b'>]><annotations/>"}, None, TOKEN, 422, "DOCTYPE/ENTITY"),
    ({"patient_narrative": "q", "sentences": NOTE}, None, None, 401, "bearer token"),
    ({"patient_narrative": "q", "sentences": NOTE}, None, "wrong", 401, "bearer token"),
    ({"patient_narrative": "q", "sentences": [{"id": str(i), "text": "word " * 20} for i in range(5000)]}, None,
     TOKEN, 413, "over serve.max_request_bytes=400000"),
])
def test_each_error_class_is_a_4xx_naming_the_problem(archehr, body, content, token, status, message):
    r = post(archehr, "/v1/archehr/answer", body, content, token)
    assert r.status_code == status and message in r.json()["error"], r.text


def idle(server, within: float = 120) -> None:
    """Wait until no work runs, timed-out work included (it keeps its worker until it ends)."""
    deadline = time.monotonic() + within
    while httpx.get(server.url + "/health").json()["in_flight"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def big(tag: str) -> dict:
    """2,000 sentences never seen before, in this run or an earlier one (the vector cache persists): several seconds
    of work."""
    tag = f"{tag}-{uuid.uuid4().hex[:8]}"
    return {"patient_narrative": "Why?", "sentences": [{"id": str(i), "text": f"Finding {tag}-{i} was noted."}
                                                      for i in range(2000)]}


def test_a_slow_request_is_504_and_beyond_capacity_and_queue_is_429(archehr):
    slow = post(archehr, "/v1/archehr/answer", big("slow"))
    assert slow.status_code == 504 and "serve.timeout_s=1" in slow.json()["error"]
    health = httpx.get(archehr.url + "/health").json()
    assert health["in_flight"] == 1 and health["timed_out_running"] == 1  # it still computes, in its slot
    idle(archehr)
    with ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(lambda i: post(archehr, "/v1/archehr/answer", big(f"q{i}")), range(6)))
    refused = [r for r in responses if r.status_code == 429]
    assert len(refused) == 4  # 1 runs, 1 waits (serve.max_concurrency=1, serve.max_queue=1), 4 are turned away
    assert all(r.headers["retry-after"] == "1" and "busy" in r.json()["error"] for r in refused)


def test_concurrent_small_requests_all_succeed(archehr):
    idle(archehr)  # timed-out work of the previous test holds the one worker until it ends
    body = {"patient_narrative": "Why was my lisinopril stopped?", "sentences": NOTE}
    with ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(lambda i: post(archehr, "/v1/archehr/answer", {**body, "case_id": f"c{i}"}),
                                  range(2)))
    assert [r.status_code for r in responses] == [200, 200]
    assert [r.json()["case_id"] for r in responses] == ["c0", "c1"]


def test_chunked_oversized_non_utf8_and_deep_bodies_are_refused_as_documented(archehr):
    def chunks():
        for _ in range(600):
            yield b'{"patient_narrative": "q", "sentences": [' + b'{"id": "1", "text": "' + b"x" * 1000 + b'"}, '
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    r = httpx.post(archehr.url + "/v1/archehr/answer", content=chunks(), headers=headers, timeout=60)
    assert r.status_code == 413 and "serve.max_request_bytes=400000" in r.json()["error"]
    for content, message in ((b'{"patient_narrative": "\xff"}', "not UTF-8"), (b"[" * 100_000, "nested too deeply")):
        r = post(archehr, "/v1/archehr/answer", content=content)
        assert r.status_code == 422 and message in r.json()["error"], r.text


def test_the_issue_54_replay_is_refused_as_4xx_error_objects(archehr):
    """A lone surrogate in the narrative (the question model's tokenizer) or in the note (the embedder) was a 500 with
    a traceback, counted in /health's connection_errors; xml beside a narrative answered the xml and dropped the
    narrative; the lower-case `bearer` scheme was refused."""
    for body, where in [('{"patient_narrative": "why \\ud800 stopped?", "note": "Lisinopril was held."}',
                         "patient_narrative: a lone surrogate U+D800"),
                        ('{"patient_narrative": "Why was it held?", "note": "Lisinopril \\udc00 was held."}',
                         "note: a lone surrogate U+DC00")]:
        r = post(archehr, "/v1/archehr/answer", content=body.encode())
        assert r.status_code == 422 and r.json()["error"].startswith(where), r.text
    both = post(archehr, "/v1/archehr/answer", {"xml": BUNDLED_CASES.read_text(), "patient_narrative": "Aspirin?"})
    assert both.status_code == 422 and "give the case as xml or as fields, not both" in both.json()["error"]
    lower = httpx.post(archehr.url + "/v1/archehr/answer", headers={"Authorization": f"bearer {TOKEN}"}, timeout=60,
                       json={"patient_narrative": "Why was my lisinopril stopped?", "sentences": NOTE})
    assert lower.status_code == 200, lower.text
    assert httpx.get(archehr.url + "/health").json()["connection_errors"] == {}
