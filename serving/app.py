"""The FastAPI app of `task=serve`: one program, built once by runners/serve.py, over HTTP (docs/serving.md).

`POST /v1/<program>/<verb>` takes its route, models and adapters from the program's contract; `GET /` is a page to try
it, `GET /health` the counts. An LM failure is answered by the no-LM program or the contract's fallback record."""
# No `from __future__ import annotations`: the endpoint's body annotation must be the contract's model class itself.

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import dspy
from dspy.utils.exceptions import LMError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from omegaconf import DictConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from common.contract import ProgramContract
from common.errors import ClinprogError
from common.logs import printable
from common.settings import serve_settings
from lms.errors import lm_failure
from serving.admission import Gate
from serving.body_guard import BodyGuard, Readers, error, loopback_only
from serving.log_filters import install_log_filters
from serving.page import page

log = logging.getLogger("clinprog.serve")
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#24324a"/><path d="M7 3h2v4h4v2H9v4H7V9H3V7h4z" fill="#fff"/></svg>')


class LMFailed(Exception):
    """The LM failed and the program has neither a no-LM program nor a fallback record: a 502 naming the failure."""


def internal(exc: BaseException) -> JSONResponse:
    """A bug: its traceback logged on clinprog.serve (not counted among /health's connection errors), a 500 naming
    only its type (its message may quote the request)."""
    log.error("unexpected %s while answering a request", type(exc).__name__, exc_info=exc)
    return error(500, f"internal error ({type(exc).__name__}): the server's log has the traceback")


def create_app(cfg: DictConfig, contract: ProgramContract, program: dspy.Module,
               no_lm_program: dspy.Module | None = None) -> FastAPI:
    """The API of `contract`'s program; `no_lm_program` (the program without an LM, if it has one) answers LM failures."""
    request_model, response_model = contract.serve_schemas()
    s = serve_settings(cfg)
    gate = Gate(s.max_concurrency, s.max_queue)
    token = s.token()
    lm_name = ((cfg.get("lm") or {}).get("client") or {}).get("model", "none")
    readers = Readers(s.max_body_readers)
    counter = install_log_filters()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        gate.pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="clinprog", version="0.1.0", lifespan=lifespan,
                  description=f"program={contract.name}, lm={lm_name}: {__doc__.splitlines()[0]}")
    app.add_middleware(BodyGuard, token=token, max_bytes=s.max_request_bytes, readers=readers,
                       read_timeout_s=s.read_timeout_s, max_items=s.max_sentences, hosts=loopback_only(s.host, token))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error(422, f"malformed JSON at character {first['loc'][-1]}: {first.get('ctx', {}).get('error', '')}")
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        kind = request.headers.get("content-type") or "none"
        if where == "body" and first.get("type") in ("dict_type", "model_attributes_type") and "json" not in kind:
            # FastAPI reads a body as JSON only when it is labelled so: say that, not "a valid dictionary"
            return error(422, f"body: send a JSON object with Content-Type: application/json (this request's "
                              f"Content-Type: {printable(kind, limit=80)})")
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
            return await asyncio.wait_for(asyncio.shield(waiter), timeout=s.timeout_s)
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
        except Exception as exc:  # noqa: BLE001 - a bug, not the client's: still the error object, never a traceback
            return internal(exc)

    the_page = page(contract.name, lm_name, contract.serve_path(), token is not None,
                    {"max_request_bytes": s.max_request_bytes, "max_sentences": s.max_sentences, "timeout_s": s.timeout_s},
                    contract.serve_page())

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home() -> HTMLResponse:
        # the page holds no data (the token is typed into it): served without the token, like /health
        return HTMLResponse(the_page, headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                                  "script-src 'unsafe-inline'; connect-src 'self'; img-src 'self'",
                                               "X-Content-Type-Options": "nosniff"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        # browsers ask for it on every page load: an icon, not a 404 in the console
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "program": contract.name, "lm": lm_name,
                "stages": contract.stage_choices(cfg), **contract.serve_health(cfg), **gate.health(),
                "reading_bodies": readers.active, "connection_errors": dict(counter.counts)}

    async def endpoint(body: request_model):  # type: ignore[valid-type]
        try:  # in a thread: parsing 2 MB of `xml` is work the event loop must not wait for
            item = await asyncio.to_thread(contract.serve_item, body)
        except ClinprogError as exc:
            return error(422, str(exc))
        except Exception as exc:  # noqa: BLE001 - as in run(): the error object; the traceback in the server's log
            return internal(exc)
        sentences = contract.serve_sentences(item)
        if sentences > s.max_sentences:
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
                record = (contract.predict(no_lm_program, item) if no_lm_program is not None
                          else contract.serve_lm_failure(item, failure))
                if record is None:
                    raise LMFailed(failure) from None
            seconds = time.perf_counter() - start
            log.info("%s %s: %d sentences, %.2f s%s", contract.unit, name, sentences, seconds,
                     " (LM failed: the fallback answered)" if failure else "")
            return {**contract.serve_response(record, failure, round(seconds, 4)), **contract.serve_echo(item)}

        return await run(work)

    for path in (contract.serve_path(), *contract.serve_aliases):
        app.post(path, response_model=response_model)(endpoint)
    return app
