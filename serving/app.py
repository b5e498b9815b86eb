"""The FastAPI app of `task=serve`: one program, built once by runners/serve.py, over HTTP.

- `POST /v1/<program>/<verb>` (and any alias the contract keeps): the route, its request and response models and the
  adapters between them and the program's item and record come from the program's contract; this module knows no
  program. `GET /health`; the OpenAPI document at `/openapi.json` (`/docs` renders it where a browser reaches a CDN).
- At most `serve.max_concurrency` requests run at once (worker threads); up to `serve.max_queue` more wait; beyond
  that 429 with `Retry-After`. `serve.timeout_s` per request (504): work that has started cannot be stopped (a
  Python thread cannot be killed), so it keeps its worker until it really ends and `/health` counts it in
  `in_flight` and `timed_out_running`; work still waiting is cancelled. A client can never pile up more than
  `serve.max_concurrency` computations.
- A body over `serve.max_request_bytes` is 413, counted as the bytes arrive (`Transfer-Encoding: chunked` too); a
  body that is not UTF-8, malformed or too deeply nested JSON and bad fields are 422; more than `serve.max_sentences`
  sentences 422. Every error is `{"error": "..."}`.
- An LM failure (server down, timeout, provider error) is not a 500: the program's non-LLM twin answers when it has
  one, else the contract's documented fallback record, each with `lm_failure` saying what failed.
- A bearer token is required when the environment variable `serve.token_env` names is set. Bodies are not logged
  unless `serve.log_bodies=true`; ids in log lines have their control characters escaped.
"""
# No `from __future__ import annotations`: the endpoint's body annotation must be the contract's model class itself.

import asyncio
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import dspy
from dspy.utils.exceptions import LMError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from omegaconf import DictConfig
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.contract import ProgramContract
from common.errors import ClinprogError
from common.logs import printable
from lms.errors import lm_failure

log = logging.getLogger("clinprog.serve")
DRAIN_FACTOR = 8   # an oversized body is read (and dropped) up to this many limits, so its client reads the 413


class LMFailed(Exception):
    """The LM failed and the program has neither a non-LLM twin nor a fallback record: a 502 naming the failure."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class Job:
    """One admitted request's work: waiting -> running -> ended, or cancelled while still waiting."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.state = "waiting"
        self.timed_out = False
        self.future: Future | None = None


class Gate:
    """Admission and worker slots: `capacity` workers run requests, `queue` more wait, the rest are turned away.

    A request counts (`admitted`) from admission until its work ends, whether or not its client still waits: work
    that ran past `serve.timeout_s` keeps its worker, so timed-out requests never add computations beyond capacity."""

    def __init__(self, capacity: int, queue: int) -> None:
        self.capacity, self.queue = capacity, queue
        self.admitted = 0
        self.running = 0
        self.timed_out_running = 0
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix="clinprog-serve")

    def submit(self, fn: Callable[[], Any]) -> Job | None:
        with self._lock:
            if self.admitted >= self.capacity + self.queue:
                return None
            self.admitted += 1
        job = Job(fn)
        job.future = self.pool.submit(self._work, job)
        job.future.add_done_callback(lambda _: self._ended())  # also when cancelled while waiting
        return job

    def _work(self, job: Job) -> Any:
        with self._lock:
            job.state = "running"
            self.running += 1
        try:
            return job.fn()
        finally:
            with self._lock:
                job.state = "ended"
                self.running -= 1
                if job.timed_out:
                    self.timed_out_running -= 1

    def _ended(self) -> None:
        with self._lock:
            self.admitted -= 1

    def abandon(self, job: Job) -> None:
        """The client no longer waits (timeout, disconnect): waiting work is cancelled, running work is counted."""
        assert job.future is not None
        if job.future.cancel():
            return
        with self._lock:
            if job.state == "running" and not job.timed_out:
                job.timed_out = True
                self.timed_out_running += 1

    def health(self) -> dict[str, int]:
        with self._lock:
            return {"in_flight": self.admitted, "running": self.running, "waiting": self.admitted - self.running,
                    "timed_out_running": self.timed_out_running, "max_concurrency": self.capacity,
                    "max_queue": self.queue}


class BodyGuard:
    """Before FastAPI reads a `/v1/` request: the bearer token, the body's size (counted as the bytes arrive, so a
    chunked body is limited too), its encoding (UTF-8) and its nesting depth (json's recursion limit): 401, 413, 422."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.token is not None and not hmac.compare_digest(headers.get(b"authorization", b""),
                                                              f"Bearer {self.token}".encode()):
            await error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.max_bytes:
            await self.too_large(f"{length} bytes")(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self.drain(receive, len(body), more)
                await self.too_large(f"over {self.max_bytes} bytes (chunked)")(scope, receive, send)
                return
        problem = self.undecodable(bytes(body))
        if problem:
            await error(422, problem)(scope, receive, send)
            return
        await self.app(scope, self.replay(bytes(body), receive), send)

    def too_large(self, size: str) -> JSONResponse:
        return error(413, f"request body of {size} is over serve.max_request_bytes={self.max_bytes}")

    async def drain(self, receive: Receive, received: int, more: bool) -> None:
        while more and received <= DRAIN_FACTOR * self.max_bytes:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            received += len(message.get("body", b""))
            more = message.get("more_body", False)

    @staticmethod
    def undecodable(body: bytes) -> str | None:
        if not body:
            return None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"the body is not UTF-8 (byte {body[exc.start]:#04x} at offset {exc.start}): send UTF-8 JSON"
        try:
            json.loads(text)
        except RecursionError:
            return "the body's JSON is nested too deeply"
        except ValueError:
            return None  # malformed JSON: FastAPI's validation names where (422)
        return None

    @staticmethod
    def replay(body: bytes, receive: Receive) -> Receive:
        sent = False

        async def again() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return again


def create_app(cfg: DictConfig, contract: ProgramContract, program: dspy.Module,
               twin: dspy.Module | None = None) -> FastAPI:
    """The API of `contract`'s program; `twin` (the program without an LM, if it has one) answers LM failures."""
    s = cfg.serve
    request_model, response_model = contract.serve_schemas()
    gate = Gate(int(s.max_concurrency), int(s.max_queue))
    token = os.environ.get(str(s.token_env)) if s.get("token_env") else None
    lm_name = ((cfg.get("lm") or {}).get("client") or {}).get("model", "none")

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        gate.pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="clinprog", version="0.1.0", lifespan=lifespan,
                  description=f"program={contract.name}, lm={lm_name}: {__doc__.splitlines()[0]}")
    app.add_middleware(BodyGuard, token=token, max_bytes=int(s.max_request_bytes))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error(422, f"malformed JSON at character {first['loc'][-1]}: {first.get('ctx', {}).get('error', '')}")
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return error(422, f"{where}: {str(first.get('msg')).removeprefix('Value error, ')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    async def run(fn: Callable[[], Any]) -> Any:
        job = gate.submit(fn)
        if job is None:
            return error(429, f"busy: {gate.capacity} requests running and {gate.queue} waiting", {"Retry-After": "1"})
        waiter = asyncio.wrap_future(job.future)
        waiter.add_done_callback(lambda f: f.cancelled() or f.exception())  # an abandoned job's error is not lost noise
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout=float(s.timeout_s))
        except TimeoutError:
            gate.abandon(job)
            return error(504, f"the program took longer than serve.timeout_s={s.timeout_s} s")
        except asyncio.CancelledError:  # the client went away
            gate.abandon(job)
            raise
        except ClinprogError as exc:
            return error(422, str(exc))
        except LMFailed as exc:
            return error(502, str(exc))

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "program": contract.name, "lm": lm_name,
                "stages": dict(cfg.program.get("stages") or {}), **contract.serve_health(cfg), **gate.health()}

    async def endpoint(body: request_model):  # type: ignore[valid-type]
        try:
            item = contract.serve_item(body)
        except ClinprogError as exc:
            return error(422, str(exc))
        sentences = contract.serve_sentences(item)
        if sentences > int(s.max_sentences):
            return error(422, f"sentences: {sentences} is over serve.max_sentences={s.max_sentences}")
        if s.log_bodies:
            log.info("request %s", printable(body.model_dump_json(), limit=None))
        name = printable(str(contract.item_id(item)))

        def work() -> dict[str, Any]:
            start = time.perf_counter()
            failure = None
            try:
                record = contract.predict(program, item)
            except LMError as exc:
                failure = str(lm_failure(cfg.lm, exc))
                record = contract.predict(twin, item) if twin is not None else contract.serve_lm_failure(item, failure)
                if record is None:
                    raise LMFailed(failure) from None
            seconds = time.perf_counter() - start
            log.info("%s %s: %d sentences, %.2f s%s", contract.unit, name, sentences, seconds,
                     " (LM failed: the fallback answered)" if failure else "")
            return contract.serve_response(record, failure, round(seconds, 4))

        return await run(work)

    for path in (contract.serve_path(), *contract.serve_aliases):
        app.post(path, response_model=response_model)(endpoint)
    return app
