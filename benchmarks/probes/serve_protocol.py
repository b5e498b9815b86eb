"""Serving probes, item 14 and round 3: numbers, tokens, auth, chunked bodies, error objects, forged ids, tracebacks."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from benchmarks.probes.harness import FORGED, TOKEN, Fail, forged_lines, laughs_text, xxe_text
from benchmarks.probes.server import CASE, NOTE, drain, expect, timed

if TYPE_CHECKING:
    from benchmarks.probes.server import Server


def serve_protocol_checks(check: Callable, answered: Callable, tmp: Path) -> None:
    """Item 14 and round 3: numbers, tokens, auth, chunked bodies, error objects, forged ids, tracebacks."""
    @check("14", "a JSON number of 4,301 digits is 422 (not 400)")
    def digits(server: Server) -> None:
        expect(server.post(content=b'{"patient_narrative": "Why?", "case_id": ' + b"9" * 4301 + b"}"), 422,
               "more digits")

    @check("14", "a token sent in the query string is not written to the access log")
    def query_token(server: Server) -> None:
        httpx.post(f"{server.url}/v1/archehr/answer?token=s3cr3t-probe-token", json=CASE, timeout=30)
        time.sleep(0.3)
        if "s3cr3t-probe-token" in server.log():
            raise Fail("the access log holds the token")

    for what, headers, path in (
            ("no Authorization header", {}, "/v1/archehr/answer"),
            ("a wrong token", {"Authorization": "Bearer wrong"}, "/v1/archehr/answer"),
            ("a bearer without a token", {"Authorization": "Bearer"}, "/v1/archehr/answer"),
            ("a prefix of the token", {"Authorization": f"Bearer {TOKEN[:-1]}"}, "/v1/archehr/answer"),
            ("the token and more", {"Authorization": f"Bearer {TOKEN}x"}, "/v1/archehr/answer"),
            ("Basic auth", {"Authorization": "Basic " + TOKEN}, "/v1/archehr/answer"),
            ("the token in another header", {"X-Token": TOKEN}, "/v1/archehr/answer"),
            ("the token in the query string", {}, f"/v1/archehr/answer?token={TOKEN}"),
            ("a doubled slash (//v1/...)", {}, "//v1/archehr/answer"),
            ("an upper-case path (/V1/...)", {}, "/V1/archehr/answer"),
            ("a dot segment (/v1/./archehr/answer)", {}, "/v1/./archehr/answer"),
            ("a percent-encoded path", {}, "/v1/archehr/%61nswer"),
            ("a trailing slash", {}, "/v1/archehr/answer/")):
        @check("r3", f"auth: {what} is never answered 200")
        def auth(server: Server, headers=headers, path=path) -> None:
            r = httpx.post(server.url + path, content=json.dumps(CASE).encode(),
                           headers={"Content-Type": "application/json", **headers}, timeout=30)
            if r.status_code < 300 or r.status_code >= 500:
                raise Fail(f"{r.status_code}: {r.text[:200]}")

    @check("r3", "auth: the right token is answered 200")
    def auth_ok(server: Server) -> None:
        expect(server.post(CASE), 200)

    @check("r3", "auth: the bearer scheme is case-insensitive (RFC 7235)")
    def auth_lower(server: Server) -> None:
        r = httpx.post(f"{server.url}/v1/archehr/answer", json=CASE, timeout=60,
                       headers={"Authorization": f"bearer {TOKEN}"})
        expect(r, 200)

    @check("r3", "60 small requests at once are answered, none 503 'still sending their bodies'")
    def sixty(server: Server) -> None:
        with ThreadPoolExecutor(60) as pool:
            statuses = list(pool.map(lambda _: server.post(CASE).status_code, range(60)))
        if 503 in statuses:
            raise Fail(f"{statuses.count(503)} x 503 of 60")

    @check("r3", "/favicon.ico is an icon")
    def favicon(server: Server) -> None:
        expect(httpx.get(f"{server.url}/favicon.ico", timeout=10), 200)

    for what, content, status, says in (
            ("JSON nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000, 422, "nested too deeply"),
            ("a field nested 100,000 deep", b'{"case_id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 422,
             "nested too deeply"),
            ("a body that is not UTF-8", b'{"patient_narrative": "caf\xe9"}', 422, "not UTF-8"),
            ("malformed JSON", b'{"patient_narrative": ', 422, "malformed JSON"),
            ("XXE in xml", json.dumps({"xml": xxe_text()}).encode(), 422, "DOCTYPE/ENTITY"),
            ("billion laughs in xml", json.dumps({"xml": laughs_text()}).encode(), 422, "DOCTYPE/ENTITY"),
            ("duplicate sentence ids", json.dumps({**CASE, "sentences": NOTE + NOTE[:1]}).encode(), 422,
             "duplicate ids"),
            # #54: a lone surrogate reached the tokenizer (500, a traceback); xml beside fields dropped the fields
            ("a lone surrogate in the narrative", b'{"patient_narrative": "why \\ud800 stopped?", "note": "Lisinopril '
             b'was held."}', 422, "patient_narrative: a lone surrogate"),
            ("a lone surrogate in the note", b'{"patient_narrative": "Why?", "note": "Lisinopril \\udc00 was held."}',
             422, "note: a lone surrogate"),
            ("xml beside a narrative", json.dumps({"xml": "<annotations/>", "patient_narrative": "Aspirin?"}).encode(),
             422, "not both"),
            ("a body over serve.max_request_bytes", b" " * 2_100_000, 413, "serve.max_request_bytes")):
        @check("r3", f"{what} is {status} naming the problem")
        def bad_body(server: Server, content=content, status=status, says=says) -> None:
            with timed(10, "the refusal"):
                expect(server.post(content=content), status, says)

    @check("r3", "a chunked body over serve.max_request_bytes is 413")
    def chunked(server: Server) -> None:
        def chunks():
            yield b'{"patient_narrative": "q", "case_id": "'
            for _ in range(300):
                yield b"x" * 10_000
            yield b'"}'
        r = httpx.post(f"{server.url}/v1/archehr/answer", content=chunks(), timeout=30,
                       headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        expect(r, 413, "serve.max_request_bytes")

    @check("r3", "404 and 405 are error objects; a bad Content-Length is a 4xx; the server lives on")
    def errors(server: Server) -> None:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.get(f"{server.url}/v1/nowhere", headers=auth, timeout=10)
        if r.status_code != 404 or "error" not in r.json():
            raise Fail(f"404: {r.status_code} {r.text[:100]}")
        r = httpx.get(f"{server.url}/v1/archehr/answer", headers=auth, timeout=10)
        if r.status_code != 405 or "error" not in r.json():
            raise Fail(f"405: {r.status_code} {r.text[:100]}")
        for length in (b"-1", b"abc", b"99999999999999999999999"):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(b"POST /v1/archehr/answer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                             + TOKEN.encode() + b"\r\nContent-Length: " + length + b"\r\n\r\n{}")
                answer = drain(sock, time.monotonic() + 10)
            if answer is None or (answer and not re.match(rb"HTTP/1\.1 4\d\d", answer)):
                raise Fail(f"Content-Length {length.decode()}: {answer[:80] if answer else answer!r}")
        expect(server.post(CASE), 200)

    @check("r3", "a case_id holding a newline writes no forged line into the server's log")
    def forged_id(server: Server) -> None:
        expect(server.post({**CASE, "case_id": f"x\n{FORGED}"}), 200)
        time.sleep(0.3)
        text = server.log() + ((server.run / "main.log").read_text() if (server.run / "main.log").exists() else "")
        if forged_lines(text):
            raise Fail(f"forged: {forged_lines(text)[0]!r}")

    @check("3", "the server's log holds no traceback after all of the above")
    def no_tracebacks(server: Server) -> None:
        text = server.log()
        if "Traceback" in text or text.count("Too many open files") > 3:
            lines = [line for line in text.splitlines() if "Traceback" in line or "Too many" in line]
            raise Fail(f"{len(lines)} traceback lines, e.g. {lines[:2]}")
