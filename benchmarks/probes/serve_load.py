"""Serving probes, items 1-3: big, long and slow requests, each answered in time while /health answers within 1 s."""

from __future__ import annotations

import json
import random
import re
import string
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from benchmarks.probes.harness import Fail
from benchmarks.probes.server import CASE, NOTE, HealthWatch, drain, expect, slow_sender

if TYPE_CHECKING:
    from benchmarks.probes.server import Server


def serve_load_checks(check: Callable, answered: Callable, tmp: Path) -> None:
    """Items 1-3: big, long and slow requests, each answered in time while /health answers within 1 s."""
    @check("1", "76,000 one-letter sentences with unique ids (1.96 MB): 422 within 5 s, /health under 1 s meanwhile")
    def many_sentences(server: Server) -> None:
        body = {"patient_narrative": "Why?", "sentences": [{"id": str(i), "text": "a"} for i in range(76_000)]}
        content = json.dumps(body, separators=(",", ":")).encode()
        if not 1_900_000 < len(content) < 2_000_000:
            raise Fail(f"the probe's body is {len(content)} bytes")
        expect(answered(server, 5, lambda: server.post(content=content)), 422, "over serve.max_sentences")

    @check("1", "the same as one case's XML (58,000 sentences): 422 within 5 s, /health under 1 s meanwhile")
    def many_sentences_xml(server: Server) -> None:
        xml = ("<annotations><case id='1'><patient_narrative>Why?</patient_narrative><note_excerpt_sentences>"
               + "".join(f"<sentence id='{i}'>a</sentence>" for i in range(58_000))
               + "</note_excerpt_sentences></case></annotations>")
        expect(answered(server, 5, lambda: server.post({"xml": xml})), 422, "over serve.max_sentences")

    @check("1", "an XML body of 30,000 cases (1.9 MB): 422 within 5 s, /health under 1 s meanwhile")
    def many_cases_xml(server: Server) -> None:
        xml = ("<annotations>" + "".join(f"<case id='{i}'><patient_narrative>a</patient_narrative></case>"
                                         for i in range(30_000)) + "</annotations>")
        expect(answered(server, 5, lambda: server.post({"xml": xml})), 422, "one <case> per request")

    @check("1", "100,000 question phrases (1 MB): answered or refused within 10 s, /health under 1 s meanwhile")
    def many_phrases(server: Server) -> None:
        body = {**CASE, "patient_question": ["why"] * 100_000}
        expect(answered(server, 10, lambda: server.post(body)), (200, 422))

    def bounded(server: Server, narrative: str) -> None:
        rss, peak = server.memory_kb()
        r = answered(server, 30, lambda: server.post({"case_id": "long", "patient_narrative": narrative,
                                                      "sentences": NOTE}))
        expect(r, (200, 422))
        grew = server.memory_kb()[1] - max(rss, peak)
        if grew > 500_000:
            raise Fail(f"peak memory grew by {grew / 1e3:.0f} MB (from {rss / 1e3:.0f} MB)")

    @check("2", "a 200 KB one-word narrative (default question stage): answered within 30 s, peak memory +500 MB "
                "at most, /health under 1 s meanwhile")
    def long_word(server: Server) -> None:
        bounded(server, "".join(random.Random(1).choices(string.ascii_lowercase, k=200_000)))

    @check("2", "a 1 MB 'aaaa...' narrative: answered within 30 s, peak memory +500 MB at most, /health under 1 s")
    def long_a(server: Server) -> None:
        bounded(server, "a" * 1_000_000)

    @check("3", "2,000 slow senders (Content-Length 100000, one byte, then hold): absorbed within 5 s, then /health "
                "under 1 s and a request answered at once while they hold, every sender closed within "
                "serve.read_timeout_s, no traceback flood in the log")
    def slow_senders(server: Server) -> None:
        start = time.monotonic()
        lines_before = len(server.log().splitlines())
        senders = []
        for _ in range(2000):
            try:
                senders.append(slow_sender(server.port))
            except OSError:
                break  # the backlog or our own descriptors: as many as fit
        if len(senders) < 1000:
            raise Fail(f"only {len(senders)} senders could connect")
        # the burst: one event loop accepts them one by one, so /health waits its turn (and may meet the
        # connection cap, 503) until the burst is through; then it must answer at once while 32 of them hold
        while True:
            try:
                if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - start > 5:
                raise Fail(f"/health did not answer 200 within 5 s of the burst of {len(senders)}")
        absorbed = time.monotonic() - start
        expect(answered(server, 3, lambda: server.post(CASE, timeout=10)), (200, 503))
        with HealthWatch(server.url) as watch:
            answers = [drain(sock, start + 10 + 6) for sock in senders]  # serve.read_timeout_s=10 (the default)
        if watch.problem():
            raise Fail(f"{watch.problem()} (the burst was absorbed in {absorbed:.1f} s)")
        held = sum(a is None for a in answers)
        if held:
            raise Fail(f"{held} of {len(answers)} senders still open {time.monotonic() - start:.0f} s later")
        statuses = Counter(a.split(b" ", 2)[1].decode() if a.startswith(b"HTTP/1.1 ") else "closed" for a in answers)
        if set(statuses) - {"503", "408", "closed"}:
            raise Fail(f"answers {dict(statuses)}")
        log = [line for line in server.log().splitlines()[lines_before:]  # less the access log: a line a request
               if not re.match(r'INFO: +127\.0\.0\.1:\d+ - "', line)]
        tracebacks = sum("Traceback" in line for line in log)
        if tracebacks or len(log) > 20:
            raise Fail(f"{len(log)} log lines, {tracebacks} tracebacks, e.g. {log[:2]}")
        health = httpx.get(f"{server.url}/health", timeout=5).json()
        if health["reading_bodies"]:
            raise Fail(f"/health still counts {health['reading_bodies']} bodies being read")
        expect(server.post(CASE), 200)
