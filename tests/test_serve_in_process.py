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
    return TestClient(app)


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
