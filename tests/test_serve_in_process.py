"""The served app in this process (`runners.serve.build_app` through FastAPI's TestClient): what a request gets
back where the real server's limits are not the point (those stay in test_serve.py, on a real `task=serve`)."""

import pytest
from fastapi.testclient import TestClient

from lms.local_server import free_port
from tests.builders import config

pytestmark = pytest.mark.unit

NOTE = [{"id": "1", "text": "HOSPITAL COURSE:"},
        {"id": "2", "text": "Lisinopril was held because of hypotension and acute kidney injury."},
        {"id": "3", "text": "Her creatinine improved to 1.1 by discharge."}]


def served(*overrides: str) -> TestClient:
    from runners.serve import build_app

    app, _ = build_app(config("task=serve", *overrides), ["task=serve", *overrides])
    return TestClient(app, base_url="http://127.0.0.1")  # a token-less loopback server answers only its own names


def test_an_lm_failure_is_answered_by_the_documented_fallback(tmp_path, monkeypatch):
    monkeypatch.delenv("CLINPROG_SERVE_TOKEN", raising=False)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    lm = ("lm=openai_compatible", f"lm.client.api_base={dead}", "lm.client.check=false", "lm.client.num_retries=0",
          f"cache_dir={tmp_path / 'cache'}")
    with served("program=archehr", "program/archehr/question=baseline", *lm) as archehr:
        r = archehr.post("/v1/archehr/answer", json={"patient_narrative": "Why was my lisinopril stopped?",
                                                     "sentences": NOTE})
        assert r.status_code == 200, r.text
        assert r.json()["lm_failure"].startswith("lm=openai_compatible (127.0.0.1:")
        assert "2" in r.json()["evidence_ids"]  # the non-LLM program answered
    with served("program=mediqa_corr", "program.search.enabled=false", *lm) as mediqa:
        r = mediqa.post("/v1/mediqa_corr/correct", json={"text_id": "n1", "sentences": [
            {"id": "0", "text": "A man has fever."}, {"id": "1", "text": "He is treated with penicillin for MRSA."}]})
        assert r.status_code == 200, r.text
        assert r.json()["line"] == "n1 0 -1 NA" and r.json()["outcome"] == "lm_failure" and r.json()["lm_failure"]
        bad = mediqa.post("/v1/mediqa_corr/correct", json={"sentences": [{"id": "x", "text": "a"}]})
        assert bad.status_code == 422 and "ids must be integers" in bad.json()["error"]


def test_a_note_given_as_text_is_numbered_as_the_page_numbers_it_and_echoed(monkeypatch):
    from common.note_text import split_note

    monkeypatch.delenv("CLINPROG_SERVE_TOKEN", raising=False)
    text = "HOSPITAL COURSE:\nLisinopril was held. Creatinine improved to 1.1 by discharge.\n\n  Discharged home."
    assert split_note(text) == ["HOSPITAL COURSE:", "Lisinopril was held.", "Creatinine improved to 1.1 by discharge.",
                                "Discharged home."]
    with served("program=archehr", "program/archehr/question=baseline") as archehr:
        r = archehr.post("/v1/archehr/answer", json={"patient_narrative": "Why was my lisinopril stopped?",
                                                     "note": text})
        assert r.status_code == 200, r.text
        assert [s["id"] for s in r.json()["sentences"]] == ["1", "2", "3", "4"]
        assert r.json()["sentences"][1]["text"] == "Lisinopril was held."
        assert set(r.json()["evidence_ids"]) <= {"1", "2", "3", "4"} and r.json()["answer_sentences"]
        both = archehr.post("/v1/archehr/answer", json={"patient_narrative": "Why?", "note": text, "sentences": NOTE})
        assert both.status_code == 422 and "not both" in both.json()["error"]
        page = archehr.get("/")
        assert page.status_code == 200 and "programRender" in page.text and "default-src 'none'" in \
            page.headers["content-security-policy"]
        assert 'id="token"' not in page.text  # no token configured: the page asks for none


def test_a_plain_row_posts_as_it_is_and_an_unknown_field_is_refused(monkeypatch):
    monkeypatch.delenv("CLINPROG_SERVE_TOKEN", raising=False)
    row = {"id": "a7", "message": "Why was my lisinopril stopped?", "note": "Lisinopril was held. Discharged home."}
    with served("program=archehr", "program/archehr/question=baseline") as archehr:
        r = archehr.post("/v1/archehr/answer", json=row)  # a row of data.cases=notes.jsonl, field for field
        assert r.status_code == 200, r.text
        assert r.json()["case_id"] == "a7" and len(r.json()["sentences"]) == 2
        bad = archehr.post("/v1/archehr/answer", json={**row, "bogus": 1})
        assert bad.status_code == 422 and "bogus" in bad.json()["error"], bad.text
