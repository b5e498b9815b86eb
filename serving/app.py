"""The FastAPI app of `task=serve`: the configured program, loaded once, over HTTP.

- `POST /v1/archehr/answer` (program=archehr or archehr2025) and `POST /v1/mediqa_corr/correct` (program=mediqa_corr);
  `GET /health`; the OpenAPI document at `/openapi.json` (`/docs` renders it where the browser can reach a CDN).
- At most `serve.max_concurrency` requests run at once (threads); up to `serve.max_queue` more wait; beyond that 429
  with `Retry-After`. A request over `serve.max_request_bytes` is 413; more than `serve.max_sentences` sentences 422;
  `serve.timeout_s` per request (504). Malformed JSON or bad fields are 422 naming the field.
- An LM failure (server down, timeout, provider error) is not a 500: ArchEHR answers with its non-LLM program and
  MEDIQA-CORR with "no error", each with `lm_failure` saying what failed.
- A bearer token is required when the environment variable `serve.token_env` names is set. Bodies are not logged
  unless `serve.log_bodies=true`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import threading
import time
from typing import Any

import anyio
from dspy.utils.exceptions import LMError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from omegaconf import DictConfig, OmegaConf, open_dict

from common.errors import ClinprogError
from lms import build_role_lms
from lms.errors import lm_failure
from runners.common import configure_dspy
from runners.program import choose_lm_or_offline, contract_for
from serving.schemas import ArchEHRRequest, ArchEHRResponse, MediqaRequest, MediqaResponse
from tasks.archehr.data import Case, NoteSentence, cases_from_xml
from tasks.mediqa_corr.data import Note

log = logging.getLogger("clinprog.serve")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class Gate:
    """Admission: `capacity` requests run, `queue` more wait, the rest are turned away."""

    def __init__(self, capacity: int, queue: int) -> None:
        self.capacity, self.queue = capacity, queue
        self.admitted = 0
        self._lock = threading.Lock()
        self.limiter = anyio.CapacityLimiter(capacity)

    def enter(self) -> bool:
        with self._lock:
            if self.admitted >= self.capacity + self.queue:
                return False
            self.admitted += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.admitted -= 1


def create_app(cfg: DictConfig) -> FastAPI:
    s = cfg.serve
    contract = contract_for(cfg)
    roles = choose_lm_or_offline(cfg, contract)
    configure_dspy(cfg)
    program = contract.build(cfg, build_role_lms(cfg.lm, roles) if roles else {})
    family = "mediqa_corr" if contract.name == "mediqa_corr" else "archehr"
    offline_program = None
    if family == "archehr" and roles:  # what answers when the LM fails
        offline_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
        with open_dict(offline_cfg):
            offline_cfg.lm.client = None
        choose_lm_or_offline(offline_cfg, contract)
        offline_program = contract.build(offline_cfg, {})
    for built in (program, offline_program):  # load the embedder now, not in the first request
        for _, module in (built.named_sub_modules() if built is not None else []):
            if hasattr(module, "embedder"):
                module.embedder.encode_queries(["warm up"])
                break
    gate = Gate(int(s.max_concurrency), int(s.max_queue))
    token = os.environ.get(str(s.token_env)) if s.get("token_env") else None
    lm_name = (cfg.lm.get("client") or {}).get("model", "none")
    app = FastAPI(title="clinprog", version="0.1.0",
                  description=f"program={contract.name}, lm={lm_name}: {__doc__.splitlines()[0]}")

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if token is not None and request.url.path.startswith("/v1/"):
            sent = request.headers.get("authorization", "")
            if not hmac.compare_digest(sent, f"Bearer {token}"):
                return error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > int(s.max_request_bytes):
            return error(413, f"request body of {length} bytes is over serve.max_request_bytes={s.max_request_bytes}")
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error(422, f"malformed JSON at character {first['loc'][-1]}: {first.get('ctx', {}).get('error', '')}")
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return error(422, f"{where}: {str(first.get('msg')).removeprefix('Value error, ')}")

    async def run(fn) -> Any:
        if not gate.enter():
            return error(429, f"busy: {gate.capacity} requests running and {gate.queue} waiting",
                         {"Retry-After": "1"})
        try:
            return await asyncio.wait_for(anyio.to_thread.run_sync(fn, limiter=gate.limiter),
                                          timeout=float(s.timeout_s))
        except TimeoutError:
            return error(504, f"the program took longer than serve.timeout_s={s.timeout_s} s")
        except ClinprogError as exc:
            return error(422, str(exc))
        finally:
            gate.leave()

    @app.get("/health")
    def health() -> dict[str, Any]:
        index = None
        if family == "mediqa_corr":
            index = "search on" if cfg.program.search.enabled else "search off"
        return {"status": "ok", "program": contract.name, "lm": lm_name,
                "stages": dict(cfg.program.get("stages") or {}), "index": index, "in_flight": gate.admitted,
                "max_concurrency": gate.capacity, "max_queue": gate.queue}

    if family == "archehr":
        @app.post("/v1/archehr/answer", response_model=ArchEHRResponse)
        async def answer(body: ArchEHRRequest):
            if body.xml is not None:
                try:
                    cases = cases_from_xml(body.xml)
                except ClinprogError as exc:
                    return error(422, f"xml: {exc}")
                if len(cases) != 1:
                    return error(422, f"xml: one <case> per request, not {len(cases)}")
                case = cases[0]
            else:
                case = Case(body.case_id, body.patient_narrative or "", tuple(body.patient_question),
                            body.clinician_question, None, tuple(NoteSentence(x.id, x.text) for x in body.sentences))
            if len(case.sentences) > int(s.max_sentences):
                return error(422, f"sentences: {len(case.sentences)} is over serve.max_sentences={s.max_sentences}")
            if s.log_bodies:
                log.info("request %s", body.model_dump_json())

            def work() -> dict[str, Any]:
                start = time.perf_counter()
                failure = None
                try:
                    pred = program(case=case)
                except LMError as exc:
                    if offline_program is None:
                        raise
                    failure = str(lm_failure(cfg.lm, exc))
                    pred = offline_program(case=case)
                seconds = time.perf_counter() - start
                log.info("case %s: %d sentences, %.2f s%s", case.case_id, len(case.sentences), seconds,
                         " (LM failed: non-LLM answer)" if failure else "")
                return {"case_id": case.case_id, "clinician_question": pred.clinician_question,
                        "evidence_ids": list(pred.evidence_ids), "scores": pred.scores, "selection": pred.selection,
                        "answer": pred.answer, "alignment": pred.alignment, "grounding": pred.get("grounding"),
                        "fallbacks": pred.fallbacks, "lm_failure": failure, "usage": pred.usage,
                        "seconds": round(seconds, 4)}

            return await run(work)

    else:
        @app.post("/v1/mediqa_corr/correct", response_model=MediqaResponse)
        async def correct(body: MediqaRequest):
            if len(body.sentences) > int(s.max_sentences):
                return error(422, f"sentences: {len(body.sentences)} is over serve.max_sentences={s.max_sentences}")
            note = Note(body.text_id, " ".join(x.text for x in body.sentences),
                        tuple((x.id, x.text) for x in body.sentences))
            if s.log_bodies:
                log.info("request %s", body.model_dump_json())

            def work() -> dict[str, Any]:
                start = time.perf_counter()
                try:
                    record = contract.predict(program, note)
                    failure = None
                except LMError as exc:
                    failure = str(lm_failure(cfg.lm, exc))
                    record = {"flag": 0, "sentence_id": -1, "corrected": "NA", "line": f"{note.text_id} 0 -1 NA",
                              "outcome": "lm_failure", "episodes": [], "usage": {}}
                return {"text_id": note.text_id, "flag": record["flag"], "sentence_id": record["sentence_id"],
                        "correction": record["corrected"], "line": record["line"], "outcome": record["outcome"],
                        "lm_failure": failure, "episodes": record["episodes"], "usage": record["usage"],
                        "seconds": round(time.perf_counter() - start, 4)}

            return await run(work)

    return app
