"""The serving probes, in order, against one server: the checks of serve_load.py and serve_protocol.py, one at a
time (they share the server); the timing checks (items 1-3) while no command-line probe runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks.probes.harness import QUIET_MACHINE, Fail, Report, fail
from benchmarks.probes.serve_load import serve_load_checks
from benchmarks.probes.serve_protocol import serve_protocol_checks
from benchmarks.probes.server import HealthWatch, Server


def serve_probes(report: Report, tmp: Path, only: Callable[[str, str], bool]) -> None:
    """Every serving probe, in order, against one server (they share it: run one at a time)."""
    checks: list[tuple[str, str, Callable[[Server], None]]] = []

    def check(item: str, what: str):
        def register(fn: Callable[[Server], None]) -> Callable[[Server], None]:
            if only(item, what):
                checks.append((item, what, fn))
            return fn
        return register

    def answered(server: Server, within: float, send: Callable[[], httpx.Response]) -> httpx.Response:
        """`send()`'s response, which must come within `within` s while /health answers within 1 s."""
        with HealthWatch(server.url) as watch:
            begun = time.monotonic()
            try:
                r = send()
            except httpx.HTTPError as exc:
                raise Fail(f"no answer ({type(exc).__name__}); {watch.problem() or ''}") from None
            took = time.monotonic() - begun
        problems = [f"answered after {took:.1f} s (over {within:.0f} s)"] if took > within else []
        problems += [watch.problem()] if watch.problem() else []
        if problems:
            raise Fail("; ".join(problems))
        return r

    serve_load_checks(check, answered, tmp)
    serve_protocol_checks(check, answered, tmp)

    if not checks:
        return
    try:
        server = Server(tmp)
    except Fail as exc:
        for item, what, _ in checks:
            report.add(item, what, lambda exc=exc: fail(f"no server: {exc}"))
        return
    try:
        for item, what, fn in checks:
            if server.process.poll() is not None:
                report.add(item, what, lambda: fail(f"the server exited ({server.process.returncode}) before"))
                continue
            if item in ("1", "2", "3"):  # /health within 1 s: measured while no command shares the 2 cores
                with QUIET_MACHINE.alone():
                    report.add(item, what, lambda fn=fn: fn(server))
            else:
                report.add(item, what, lambda fn=fn: fn(server))
    finally:
        server.stop()


