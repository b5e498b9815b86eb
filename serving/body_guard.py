"""What a request must pass before any route sees it: the bearer token, a loopback Host when no token is set (DNS
rebinding), a body within `serve.max_request_bytes` read within `serve.read_timeout_s`, at most
`serve.max_body_readers` bodies on their way at once."""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.logs import printable
from common.unicode_text import unicode_problem

DRAIN_FACTOR = 8   # an oversized body is read (and dropped) up to this many limits, so its client reads the 413
# Only a body still arriving this long after its request's head takes one of serve.max_body_readers: with a slot for
# every body, 28 of 60 small requests sent at the same moment were 503.
BODY_GRACE_S = 0.25
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def bearer(header: bytes) -> bytes | None:
    """The credentials of an `Authorization: Bearer <token>` header (the scheme case-insensitive, RFC 7235); None for
    another scheme."""
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
    """The Host names a token-less server on a loopback address answers, against DNS rebinding (a web page whose name
    resolves to 127.0.0.1 would use the server from the visitor's browser); None when a token is required or the
    server listens beyond this machine, where anyone who reaches it can use it anyway."""
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
    """Before FastAPI reads a request: the Host of a token-less loopback server (403), then for `/v1/` the token (401),
    bodies on their way at once (503), the body's time to arrive (408), its size as it arrives (413), its encoding
    and JSON (422)."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int, readers: Readers, read_timeout_s: float,
                 max_items: int, hosts: frozenset[str] | None) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes
        self.readers = readers
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
        # in a thread: decoding 2 MB of JSON is work the event loop (and /health) must not wait for
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
    def undecodable(body: bytes, max_items: int) -> str | None:
        """What makes `body` unreadable (not UTF-8, JSON nested too deeply, a number too long, a lone surrogate), or a
        list in it over `max_items` (`serve.max_sentences`): FastAPI's validation took 1.5 s of the event loop to
        refuse 76,000 sentences."""
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
        # a "\ud800" escape decodes to a lone surrogate, which no tokenizer can encode: refused here, not a 500 later
        return too_many_items(value, max_items) or unicode_problem(value)

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
