"""The serving probes' server: a real `python main.py task=serve` (the default no-LM program, a bearer token, a free
port), /health polled while a probe runs, and the HTTP helpers the checks share."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

from benchmarks.probes.harness import ENV, HEALTH_LIMIT_S, PY, ROOT, TOKEN, Fail, free_port, kill_group


class HealthWatch:
    """Polls GET /health (a new connection each time, as a monitor does) while a probe runs: the slowest answer."""

    def __init__(self, url: str) -> None:
        self.url, self.worst, self.failures, self.polls = url, 0.0, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                status = httpx.get(f"{self.url}/health", timeout=5).status_code
                if status != 200:
                    self.failures.append(f"status {status}")
            except httpx.HTTPError as exc:
                self.failures.append(type(exc).__name__)
            self.worst = max(self.worst, time.monotonic() - start)
            self.polls += 1
            self.stop.wait(0.1)

    def __enter__(self) -> HealthWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def problem(self) -> str | None:
        if self.failures or self.worst > HEALTH_LIMIT_S:
            return (f"/health meanwhile: slowest {self.worst:.2f} s over {self.polls} polls"
                    + (f", failures {Counter(self.failures).most_common(3)}" if self.failures else ""))
        return None


class Server:
    """`python main.py task=serve` (the default no-LM program) on a free port, with a bearer token."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.run = tmp / "serve"
        self.out = tmp / "serve.out"
        with self.out.open("wb") as sink:
            self.process = subprocess.Popen([PY, str(ROOT / "main.py"), "task=serve", "program=archehr",
                                             f"serve.port={self.port}", f"hydra.run.dir={self.run}"], cwd=ROOT,
                                            env={**ENV, "CLINPROG_SERVE_TOKEN": TOKEN}, stdout=sink,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                if self.process.poll() is not None:
                    raise Fail(f"task=serve exited {self.process.returncode}: {self.log()[-300:]}") from None
                time.sleep(0.3)
        raise Fail("task=serve did not answer /health within 150 s")

    def log(self) -> str:
        return self.out.read_text(errors="replace")

    def memory_kb(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the server process in kB."""
        status = dict(line.split(":", 1) for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
                      if ":" in line)
        return int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])

    def post(self, body: dict | None = None, content: bytes | None = None, token: str | None = TOKEN,
             path: str = "/v1/archehr/answer", headers: dict[str, str] | None = None,
             timeout: float = 120) -> httpx.Response:
        sent = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {}),
                **(headers or {})}
        data = content if content is not None else json.dumps(body, separators=(",", ":")).encode()
        return httpx.post(self.url + path, content=data, headers=sent, timeout=timeout)

    def stop(self) -> None:
        kill_group(self.process)


NOTE = [{"id": "1", "text": "HOSPITAL COURSE:"},
        {"id": "2", "text": "Lisinopril was held because of hypotension and acute kidney injury."},
        {"id": "3", "text": "Her creatinine improved to 1.1 by discharge."}]
CASE = {"case_id": "probe", "patient_narrative": "Why was my lisinopril stopped?", "sentences": NOTE}


def expect(r: httpx.Response, status: int | tuple[int, ...], says: str | None = None) -> None:
    wanted = (status,) if isinstance(status, int) else status
    if r.status_code not in wanted:
        raise Fail(f"{r.status_code} (not {'/'.join(map(str, wanted))}): {r.text[:200]}")
    if says is not None:
        try:
            error = r.json().get("error", "")
        except ValueError:
            raise Fail(f"{r.status_code} without a JSON error body: {r.text[:200]}") from None
        if says not in error:
            raise Fail(f"{r.status_code} {error[:200]!r} does not say {says!r}")


@contextlib.contextmanager
def timed(seconds: float, what: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    if took > seconds:
        raise Fail(f"{what} took {took:.1f} s (over {seconds:.0f} s)")



def slow_sender(port: int, length: int = 100_000) -> socket.socket:
    """Headers with `Content-Length: length` and one byte of the body, then nothing (the connection is held)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST /v1/archehr/answer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: %d\r\n\r\n{" % length)
    return sock


def drain(sock: socket.socket, deadline: float) -> bytes | None:
    """What the server sent before closing the connection; None if it was still open at `deadline`."""
    data = b""
    try:
        while True:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except TimeoutError:
        return None
    except OSError:
        return data
    finally:
        sock.close()
