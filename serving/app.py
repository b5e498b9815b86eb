"""The FastAPI app of `task=serve`: one program, built once by runners/serve.py, over HTTP.

- `POST /v1/<program>/<verb>` (and any alias the contract keeps): the route, its request and response models and the
  adapters between them and the program's item and record come from the program's contract; this module knows no
  program. `GET /` is a page to try it in a browser (serving/page.py); `GET /health`; the OpenAPI document at
  `/openapi.json` (`/docs` renders it where a browser reaches a CDN).
- At most `serve.max_concurrency` requests run at once (worker threads); up to `serve.max_queue` more wait; beyond
  that 429 with `Retry-After`. `serve.timeout_s` per request (504): work that has started cannot be stopped (a
  Python thread cannot be killed), so it keeps its worker until it really ends and `/health` counts it in
  `in_flight` and `timed_out_running`; work still waiting is cancelled. A client can never pile up more than
  `serve.max_concurrency` computations.
- A body over `serve.max_request_bytes` is 413, counted as the bytes arrive (`Transfer-Encoding: chunked` too); a
  body that is not UTF-8, malformed or too deeply nested JSON and bad fields are 422; more than `serve.max_sentences`
  sentences 422, and so is any list in the body holding more items, checked before the items are validated. The
  body's decoding and the request's conversion into the program's item (an `xml` case is parsed there) run in a
  thread, not on the event loop. Every error is `{"error": "..."}`.
- An LM failure (server down, timeout, provider error) is not a 500: the program's no-LM program answers when it has
  one, else the contract's documented fallback record, each with `lm_failure` saying what failed.
- Connections are bounded before any request reaches the program: at most `serve.max_connections` open (uvicorn's
  `limit_concurrency`: beyond, 503 and closed); at most `serve.max_body_readers` requests still sending their body
  (beyond, 503 and closed at once, so clients that send a body slowly cannot take every connection; `/health` reads
  no body); a request's headers, then its body, must each arrive within `serve.read_timeout_s` (the connection is
  closed, a late body with a 408 first); an idle keep-alive connection closes after `serve.keep_alive_s`.
- Connection-level warnings and errors (accept() out of file descriptors, invalid HTTP, the connection cap) are
  logged once per kind without a traceback, then as a count at 10, 100, 1000, ... times; `/health` has the counts
  (`connection_errors`).
- A bearer token is required when the environment variable `serve.token_env` names is set (empty or blank: refused at
  start, common/settings.py). Bodies are not logged
  unless `serve.log_bodies=true`; ids in log lines have their control characters escaped; query-string values
  (a token sent as `?token=...`) are redacted from the access log.
"""
# No `from __future__ import annotations`: the endpoint's body annotation must be the contract's model class itself.

import asyncio
import hmac
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import dspy
from dspy.utils.exceptions import LMError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from omegaconf import DictConfig
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.contract import ProgramContract
from common.errors import ClinprogError
from common.logs import printable
from common.settings import ServeSettings, serve_settings
from common.unicode_text import unicode_problem
from lms.errors import lm_failure
from serving.page import page

log = logging.getLogger("clinprog.serve")
DRAIN_FACTOR = 8   # an oversized body is read (and dropped) up to this many limits, so its client reads the 413
# A body still arriving this long after its request's head counts as one of serve.max_body_readers: one that arrives
# at once (almost every request) never takes a slot, so 60 small requests at the same moment are not turned away
# (28 of 60 were 503 when each took a slot while its body was on its way); clients that send slowly are still capped.
BODY_GRACE_S = 0.25
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#24324a"/><path d="M7 3h2v4h4v2H9v4H7V9H3V7h4z" fill="#fff"/></svg>')
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class LMFailed(Exception):
    """The LM failed and the program has neither a no-LM program nor a fallback record: a 502 naming the failure."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def internal(exc: BaseException) -> JSONResponse:
    """A request's unexpected exception (a bug): logged with its traceback on clinprog.serve (not uvicorn's logger,
    so it is not counted among the connection errors of /health) and answered as a 500 error object that names only
    its type (its message may quote the request)."""
    log.error("unexpected %s while answering a request", type(exc).__name__, exc_info=exc)
    return error(500, f"internal error ({type(exc).__name__}): the server's log has the traceback")


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


class OncePerKind(logging.Filter):
    """On uvicorn's and asyncio's loggers: a warning or error of one kind (its message's first line and exception
    type) is logged once, then counted and logged again only at 10, 100, 1000, ... occurrences, so thousands of
    failing connections (accept() out of file descriptors, invalid HTTP, the connection cap) are a few lines, not a
    traceback each. asyncio's records (the event loop's own: accept() failures, and the accept retries it schedules,
    which fail by the thousand once the server socket closes) and OSErrors never have their traceback logged; an
    application error's first one does. `counts` holds how often each kind happened (`/health` `connection_errors`);
    at most MAX_KINDS kinds are told apart."""

    MAX_KINDS = 50

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        first = str(record.msg if record.args else record.getMessage()).split("\n", 1)[0]
        if first.startswith("Exception in callback "):  # the callback's repr names objects and addresses
            first = first.split("(", 1)[0]
        kind = printable(first + (f" ({type(exc).__name__}{f' errno {exc.errno}' if getattr(exc, 'errno', None) else ''})"
                                  if exc is not None else ""), limit=160)
        with self._lock:
            if kind not in self.counts and len(self.counts) >= self.MAX_KINDS:
                kind = "other connection errors"
            self.counts[kind] += 1
            n = self.counts[kind]
        if n == 1:
            said = printable(record.getMessage().split("\n", 1)[0], limit=300)
            if exc is not None:
                said += f": {type(exc).__name__}: {printable(str(exc), limit=200)}"
            record.msg, record.args = f"{said} (logged once; repeats are counted in /health connection_errors)", None
            if isinstance(exc, OSError) or record.name == "asyncio":
                record.exc_info, record.exc_text = None, None
            return True
        if str(n).strip("0") == "1":  # 10, 100, 1000, ...
            record.msg, record.args = f"{kind}: {n} times so far", None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            return True
        return False


class RedactQuery(logging.Filter):
    """On uvicorn's access log: every query-string value is redacted (a token sent as `?token=...` is never written;
    the API itself takes no query parameters)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            path, _, query = args[2].partition("?")
            safe = "&".join(f"{part.split('=', 1)[0]}=[redacted]" if "=" in part else "[redacted]"
                            for part in query.split("&") if part)
            record.args = (*args[:2], f"{path}?{safe}", *args[3:])
        return True


def install_log_filters() -> OncePerKind:
    """The access-log redaction and a fresh error counter on uvicorn's and asyncio's loggers (replacing an earlier
    app's in this process)."""
    counter = OncePerKind()
    for name, new in (("uvicorn.error", counter), ("asyncio", counter), ("uvicorn.access", RedactQuery())):
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, type(new))]:
            logger.removeFilter(old)
        # first: LiteLLM, once imported (lm=openai_compatible), puts its own access-log redaction on uvicorn.access,
        # which rewrites the query before a later filter would see it
        logger.filters.insert(0, new)
    return counter


def bearer(header: bytes) -> bytes | None:
    """The credentials of an `Authorization: Bearer <token>` header; None for another scheme. The scheme is matched
    case-insensitively (RFC 7235: `bearer` and `BEARER` are the same scheme)."""
    scheme, _, credentials = header.strip().partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" else None


def host_name(header: bytes) -> str:
    """The host of a `Host` header without its port, lower-case (`[::1]:8080` -> `[::1]`, `LocalHost.:80` ->
    `localhost`)."""
    value = header.decode("latin-1").strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rpartition(":")[0].rstrip(".") if ":" in value else value.rstrip(".")


def loopback_only(host: str, token: str | None) -> frozenset[str] | None:
    """The Host names a server bound to a loopback address without a token answers (a DNS-rebinding guard: a web
    page whose name is made to resolve to 127.0.0.1 would otherwise use the server from the visitor's browser, its
    Host header naming the page's site); None when there is nothing to guard (a token is required, or the server
    listens beyond this machine, where anyone who reaches it can use it anyway: set a token)."""
    if token is not None:
        return None
    name = host.strip().lower()
    if name in LOOPBACK_HOSTS or name.startswith("127."):
        return LOOPBACK_HOSTS | {name}
    return None


class Readers:
    """How many requests are sending their bodies right now (the event loop's thread alone counts)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.active = limit, 0


class BodyGuard:
    """Before FastAPI reads a request: the Host of a token-less loopback server (every path), then for `/v1/` the
    bearer token, how many bodies are still being sent at once, the body's time to arrive and its size (counted as
    the bytes arrive, so a chunked body is limited too), its encoding (UTF-8) and its JSON (nesting depth, number
    lengths, lone surrogates): 403, 401, 503, 408, 413, 422."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int, readers: Readers | None = None,
                 read_timeout_s: float = 10.0, max_items: int | None = None,
                 hosts: frozenset[str] | None = None) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes
        self.readers = readers or Readers(32)
        self.read_timeout_s = read_timeout_s
        self.max_items = max_items
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.hosts is not None and b"host" in headers and host_name(headers[b"host"]) not in self.hosts:
            named = printable(headers[b"host"].decode("latin-1"), limit=80)
            await error(403, f"Host {named!r} is not this server's name: a server on a loopback address without a "
                             "token answers only requests to 127.0.0.1, localhost or [::1] (a guard against DNS "
                             "rebinding; set a token to serve under other names)")(scope, receive, send)
            return
        if not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if self.token is not None and not hmac.compare_digest(bearer(headers.get(b"authorization", b"")) or b"",
                                                              self.token.encode()):
            await error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.max_bytes:
            await self.too_large(f"{length} bytes")(scope, receive, send)
            return
        body = await self.read(scope, receive, send)
        if body is None:
            return
        # decoding 2 MB of JSON is work: in a thread, so the event loop (and /health) goes on meanwhile
        problem = await asyncio.to_thread(self.undecodable, body, self.max_items)
        if problem:
            await error(422, problem)(scope, receive, send)
            return
        await self.app(scope, self.replay(body, receive), send)

    async def read(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the refusal is sent (or the client left). A body still arriving after
        BODY_GRACE_S takes one of `serve.max_body_readers` slots until it is read, or is refused (503) when none is
        free."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout_s
        graced = min(loop.time() + BODY_GRACE_S, deadline)
        counted = False
        body = bytearray()
        more = True
        try:
            while more:
                if not counted:
                    try:
                        message = await asyncio.wait_for(receive(), max(0.0, graced - loop.time()))
                    except TimeoutError:
                        if loop.time() >= deadline:
                            raise
                        if self.readers.active >= self.readers.limit:
                            await error(503, f"busy: {self.readers.limit} requests are still sending their bodies "
                                             "(serve.max_body_readers)",
                                        {"Retry-After": "1", "Connection": "close"})(scope, receive, send)
                            return None
                        self.readers.active += 1
                        counted = True
                        continue
                else:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                if message["type"] == "http.disconnect":
                    return None
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_bytes:
                    await self.drain(receive, len(body), more, deadline)
                    await self.too_large(f"over {self.max_bytes} bytes (chunked)")(scope, receive, send)
                    return None
        except TimeoutError:
            await error(408, f"the request body did not arrive within serve.read_timeout_s={self.read_timeout_s:g} s "
                             f"({len(body)} bytes came)", {"Connection": "close"})(scope, receive, send)
            return None
        finally:
            if counted:
                self.readers.active -= 1
        return bytes(body)

    def too_large(self, size: str) -> JSONResponse:
        return error(413, f"request body of {size} is over serve.max_request_bytes={self.max_bytes}")

    async def drain(self, receive: Receive, received: int, more: bool, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while more and received <= DRAIN_FACTOR * self.max_bytes:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return
            if message["type"] == "http.disconnect":
                return
            received += len(message.get("body", b""))
            more = message.get("more_body", False)

    @staticmethod
    def undecodable(body: bytes, max_items: int | None = None) -> str | None:
        """What makes `body` unreadable (not UTF-8, JSON nested too deeply, a number too long, a lone surrogate in a
        string), or a list in it with more than `max_items` items (`serve.max_sentences`): refused before FastAPI
        validates the items one by one (76,000 sentences took 1.5 s of the event loop to be refused after that)."""
        if not body:
            return None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"the body is not UTF-8 (byte {body[exc.start]:#04x} at offset {exc.start}): send UTF-8 JSON"
        try:
            value = json.loads(text)
        except RecursionError:
            return "the body's JSON is nested too deeply"
        except json.JSONDecodeError:
            return None  # malformed JSON: FastAPI's validation names where (422)
        except ValueError as exc:  # json reads the text but Python cannot hold a value (an integer of >4300 digits)
            if "digits" in str(exc):
                return "a number in the body's JSON has more digits than can be read: send it as a string"
            return f"the body's JSON cannot be read ({printable(str(exc), limit=120)})"
        too_many = too_many_items(value, max_items) if max_items is not None else None
        # a "\ud800" escape decodes to a lone surrogate, which no tokenizer can encode: refused here, for every field
        # of every program, rather than a 500 from deep inside a stage
        return too_many or unicode_problem(value)

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


def too_many_items(value: Any, limit: int) -> str | None:
    """The first list in a decoded JSON body with more than `limit` items, named by its path (`sentences: 76000 is
    over serve.max_sentences=2000`); None when every list fits. Iterative: the depth was checked by json.loads."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, list):
            if len(node) > limit:
                return f"{'.'.join(path) or 'body'}: {len(node)} is over serve.max_sentences={limit}"
            stack.extend(((*path, str(i)), v) for i, v in enumerate(node) if isinstance(v, (list, dict)))
        elif isinstance(node, dict):
            stack.extend(((*path, str(k)), v) for k, v in node.items() if isinstance(v, (list, dict)))
    return None


def create_app(cfg: DictConfig, contract: ProgramContract, program: dspy.Module,
               no_lm_program: dspy.Module | None = None) -> FastAPI:
    """The API of `contract`'s program; `no_lm_program` (the program without an LM, if it has one) answers LM failures."""
    request_model, response_model = contract.serve_schemas()
    s = serve_settings(cfg)
    gate = Gate(s.max_concurrency, s.max_queue)
    token = s.token()  # the one token rule (common/settings.py): empty or blank is refused
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
                "stages": dict(cfg.program.get("stages") or {}), **contract.serve_health(cfg), **gate.health(),
                "reading_bodies": readers.active, "connection_errors": dict(counter.counts)}

    async def endpoint(body: request_model):  # type: ignore[valid-type]
        try:  # in a thread: an `xml` body is parsed here (2 MB of it is work the event loop must not wait for)
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
                record = contract.predict(no_lm_program, item) if no_lm_program is not None else contract.serve_lm_failure(item, failure)
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


def bounded_h11(head_timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline for each request's head: a connection that has not sent a complete
    request line and headers within `head_timeout_s` of opening (or of its last response) is closed. uvicorn times
    out only an idle keep-alive connection, so one that sends nothing, or its headers a byte at a time, would hold its
    file descriptor for good."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.head_timer = self.loop.call_later(head_timeout_s, self.head_timed_out)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                if self.head_timer is not None:
                    self.head_timer.cancel()
                self.head_timer = self.loop.call_later(head_timeout_s, self.head_timed_out)

        def head_timed_out(self) -> None:
            if self.cycle is None or self.cycle.response_complete:  # no request under way: its head is late
                self.timeout_keep_alive_handler()  # closes the connection

        def connection_lost(self, exc: Exception | None) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            super().connection_lost(exc)

    return BoundedH11


def server_args(settings: ServeSettings) -> dict[str, Any]:
    """uvicorn's settings for serving under `settings` (serve.*): the connection cap, the head and keep-alive timeouts
    (`uvicorn.run(app, **server_args(s))`; a test adds its port and log config)."""
    return {"host": settings.host, "port": settings.port, "log_level": "info", "timeout_graceful_shutdown": 5,
            "limit_concurrency": settings.max_connections, "timeout_keep_alive": settings.keep_alive_s,
            "http": bounded_h11(settings.read_timeout_s)}
