"""What every probe shares: constants, the report, running `main.py` as a process, the inputs written once, and the
checks of a refused or finished command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "archehr"
PY = sys.executable
QUIET = ("progress=false", "metrics.bertscore=null")
BASE = ("program=archehr", "program/archehr/question=baseline", *QUIET)  # where the question stage is not the point
TOKEN = "probe-token-0123456789"
FORGED = "[2026-01-01 00:00:00,000][clinprog][ERROR] - forged"
HEALTH_LIMIT_S = 1.0
# the environment of every process: offline, no API keys, no token unless a probe sets one, Hydra's own errors off
ENV = {k: v for k, v in os.environ.items() if k not in {
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "CLINPROG_SERVE_TOKEN", "HYDRA_FULL_ERROR"}}
ENV.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True", TOKENIZERS_PARALLELISM="false")
CLI_ENV = {**ENV, "OMP_NUM_THREADS": "1"}  # several command-line probes share 2 cores: one thread each


class Fail(Exception):
    """What a probe found instead of what is promised."""


@dataclass
class Result:
    item: str
    what: str
    problem: str | None
    seconds: float

    def line(self) -> str:
        return f"ok  {self.item} {self.what}" if self.problem is None else f"FAIL {self.item} {self.what}: {self.problem}"


class Report:
    """Results as they come (printed at once: the pool's threads share stdout through this lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: list[Result] = []

    def add(self, item: str, what: str, check: Callable[[], None]) -> None:
        start = time.monotonic()
        try:
            check()
            problem = None
        except Fail as exc:
            problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - a probe that breaks is a failure to report, not a crash
            problem = f"the probe itself raised {type(exc).__name__}: {exc}"
        result = Result(item, what, short(problem) if problem else None, time.monotonic() - start)
        with self.lock:
            self.results.append(result)
            print(result.line(), flush=True)


def fail(problem: str) -> None:
    raise Fail(problem)


def short(text: str, limit: int = 400) -> str:
    text = " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Quiet:
    """The server's timing checks (items 1-3) run while no command does: on 2 cores a command's CPU would be counted
    as the server's latency. Commands share the machine; a timing check has it alone (it waits for the commands
    in flight, and new ones wait for it)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running = 0
        self.alone_wanted = 0
        self.alone_now = False

    @contextlib.contextmanager
    def command(self) -> Iterator[None]:
        with self.cond:
            self.cond.wait_for(lambda: not self.alone_now and not self.alone_wanted)
            self.running += 1
        try:
            yield
        finally:
            with self.cond:
                self.running -= 1
                self.cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self.cond:
            self.alone_wanted += 1
            self.cond.wait_for(lambda: self.running == 0 and not self.alone_now)
            self.alone_wanted -= 1
            self.alone_now = True
        try:
            yield
        finally:
            with self.cond:
                self.alone_now = False
                self.cond.notify_all()


QUIET_MACHINE = Quiet()


def kill_group(process: subprocess.Popen) -> None:
    """Kill `process` and what it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`argv` as a real process from the repository root, output captured; one that does not end in time is killed
    with what it started and fails the probe."""
    with QUIET_MACHINE.command():
        # its own process group: what it starts (joblib's worker processes) goes when it is killed
        process = subprocess.Popen([PY, *argv], cwd=ROOT, env={**CLI_ENV, **env}, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)
            raise Fail(f"did not end within {timeout:.0f} s") from None
        return subprocess.CompletedProcess(argv, process.returncode, out, err)


def clinprog(*args: str, env: dict[str, str] | None = None, timeout: float = 150) -> subprocess.CompletedProcess:
    """`python main.py *args` from the repository root, output captured."""
    return _run([str(ROOT / "main.py"), *args], env or {}, timeout)


def script(path: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    """`python <path> *args` (a benchmark script), output captured."""
    return _run([str(path), *args], {}, timeout)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    if "Traceback (most recent call last)" in proc.stdout + proc.stderr:
        last = [line for line in proc.stderr.splitlines() if line.strip()][-1:]
        raise Fail(f"a traceback (exit {proc.returncode}): {last[0] if last else ''}")


def one_error(proc: subprocess.CompletedProcess, says: str | None = None, exact: str | None = None,
              code: int = 2, last: bool = True) -> str:
    """The one `error:` line a refused command ends in (exit `code`, no traceback; the last line of stderr unless
    `last` is false), containing `says` / equal to `exact`."""
    no_traceback(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if proc.returncode != code:
        raise Fail(f"exit {proc.returncode}, not {code}; stderr: {proc.stderr[-300:]}")
    if len(errors) != 1:
        raise Fail(f"{len(errors)} error: lines, not one: {proc.stderr[-300:]}")
    final = [line for line in proc.stderr.splitlines() if line.strip()][-1]
    if last and final != errors[0]:
        raise Fail(f"the error: line is not the last line of stderr (then: {final!r})")
    if exact is not None and errors[0] != exact:
        raise Fail(f"said {errors[0]!r}, not {exact!r}")
    if says is not None and says not in errors[0]:
        raise Fail(f"said {errors[0]!r}, which does not contain {says!r}")
    return errors[0]


def ok_run(proc: subprocess.CompletedProcess) -> None:
    no_traceback(proc)
    if proc.returncode != 0:
        raise Fail(f"exit {proc.returncode}: {proc.stderr[-300:]}")


def forged_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("[2026-01-01")]


@dataclass
class Files:
    """Inputs the probes write once, under the probe's temporary folder."""

    tmp: Path

    def path(self, *parts: str) -> Path:
        path = self.tmp.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def cases_xml(self, name: str, edit: Callable[[list[ET.Element]], None], source: Path = DATA / "bundled_cases.xml",
                  keep: int | None = None) -> Path:
        tree = ET.parse(source)
        cases = tree.getroot().findall("case")
        for case in cases[keep:] if keep is not None else []:
            tree.getroot().remove(case)
        edit(cases[:keep] if keep is not None else cases)
        path = self.path("inputs", name)
        tree.write(path, encoding="utf-8")
        return path

    def state(self, name: str, edit: Callable[[dict], None]) -> Path:
        data = json.loads((DATA / "compiled_program.json").read_text())
        edit(data)
        path = self.path("inputs", name)
        path.write_text(json.dumps(data))
        return path



def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]



def laughs_text() -> str:
    entities = "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(2, 10))
    return (f'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol1 "lol">{entities}]><annotations><case id="1">'
            "<patient_narrative>&lol9;</patient_narrative></case></annotations>")


def xxe_text() -> str:
    return ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><annotations><case id="1">'
            "<patient_narrative>&xxe;</patient_narrative></case></annotations>")

