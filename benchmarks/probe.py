"""Replay issue #28's hostile probe (items 1-15) and the earlier rounds' hostile cases against the code as it is.

    python benchmarks/probe.py [--jobs 2] [--only TEXT[,TEXT...]] [--times] [--keep]

Not part of the test suite (each case has its test there): the whole list in one go, as a hostile user would try it,
so that the next round starts from a green probe. The serving items run against a real `python main.py task=serve`
process (a free port, a temporary run folder, a bearer token, the default no-LM program and serve.* defaults);
the command-line items run real `python main.py ...` processes, a few at a time (`--jobs`). Offline: no API key, no
network (HF_HUB_OFFLINE=1); everything is written under one temporary folder, removed at the end unless `--keep`.

Prints one line per probe, `ok  <item> <what>` or `FAIL <item> <what>: <what happened>`, as each finishes, then a
summary; exits 0 only if every probe is ok. `<item>` is the issue #28 item number, or `r3` for issue #21 (round 3)
and earlier rounds. `--only TEXT,...` runs the probes whose item and description contain one of the TEXTs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import re
import select
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
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


# --- command-line probes ---------------------------------------------------------------------------------------------

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


class Workers:
    """A few long-lived Python processes (`probe.py --worker`) that run `main.py` in process, as the tests do
    (tests/cli.py's main_in_process): the same entry, exit code, stdout and stderr as `python main.py`, without paying
    the imports and model loads again for each of ~80 commands. A command that does not end in time costs its worker
    (killed, replaced)."""

    def __init__(self, n: int, log: Path) -> None:
        self.log = log
        self.idle: queue.Queue[subprocess.Popen] = queue.Queue()
        self.all: list[subprocess.Popen] = []
        for _ in range(n):
            self.idle.put(self.start())

    def start(self) -> subprocess.Popen:
        with self.log.open("ab") as sink:
            # its own process group: what it starts (joblib's worker processes) goes when it is stopped
            process = subprocess.Popen([PY, str(Path(__file__).resolve()), "--worker"], cwd=ROOT, env=CLI_ENV,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink,
                                       start_new_session=True)
        self.all.append(process)
        return process

    def run(self, request: dict, timeout: float) -> subprocess.CompletedProcess:
        with QUIET_MACHINE.command():
            return self._run(request, timeout)

    def _run(self, request: dict, timeout: float) -> subprocess.CompletedProcess:
        worker = self.idle.get()
        try:
            worker.stdin.write((json.dumps(request) + "\n").encode())
            worker.stdin.flush()
            ready, _, _ = select.select([worker.stdout], [], [], timeout)
            line = worker.stdout.readline() if ready else b""
            if not line:
                self.kill(worker)
                dead, worker = worker, self.start()
                raise Fail(f"did not end within {timeout:.0f} s" if not ready else
                           f"the worker process died (exit {dead.returncode})")
            answer = json.loads(line)
            return subprocess.CompletedProcess(request["argv"], answer["code"], answer["stdout"], answer["stderr"])
        finally:
            self.idle.put(worker)

    @staticmethod
    def kill(worker: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def stop(self) -> None:
        """End every worker: its input closed (it exits as a run would, joblib's executor shut down), then its
        process group killed, whatever is left of it."""
        for worker in self.all:
            with contextlib.suppress(OSError):
                worker.stdin.close()
        deadline = time.monotonic() + 10
        for worker in self.all:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=max(0.1, deadline - time.monotonic()))
            self.kill(worker)


WORKERS: Workers | None = None


def clinprog(*args: str, env: dict[str, str] | None = None, timeout: float = 150) -> subprocess.CompletedProcess:
    """`python main.py *args` from the repository root (in a worker's process), output captured."""
    assert WORKERS is not None
    return WORKERS.run({"kind": "main", "argv": list(args), "env": env or {}}, timeout)


def script(path: Path, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    """`python <path> *args` (a benchmark script, run in a worker's process), output captured."""
    assert WORKERS is not None
    return WORKERS.run({"kind": "script", "argv": [str(path), *args], "env": {}}, timeout)


def worker() -> None:
    """`probe.py --worker`: one JSON request a line on stdin, one JSON answer a line on the stdout it started with
    (file descriptor 1 itself goes to /dev/null, so that what a library writes there cannot break the answers)."""
    import functools
    import io
    import runpy

    sys.path.insert(0, str(ROOT))
    from in_process import exit_code_of, main_in_process

    answers = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    for line in sys.stdin:
        request = json.loads(line)
        env = {**CLI_ENV, **request["env"]}
        if request["kind"] == "main":
            done = main_in_process(request["argv"], cwd=ROOT, env=env)
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            out_buffer, err_buffer, saved = io.StringIO(), io.StringIO(), sys.argv
            sys.argv = request["argv"]
            try:
                with contextlib.redirect_stdout(out_buffer), contextlib.redirect_stderr(err_buffer):
                    code = exit_code_of(functools.partial(runpy.run_path, request["argv"][0], run_name="__main__"))
            finally:
                sys.argv = saved
            out, err = out_buffer.getvalue(), err_buffer.getvalue()
        answers.write(json.dumps({"code": code, "stdout": out, "stderr": err}) + "\n")
        answers.flush()


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


class _Cli:
    """What every command-line probe section shares: the report, the temporary files, the filter, and the job lists
    (the slow ones last, the merges after the shards)."""

    def __init__(self, report: Report, files: Files, only: Callable[[str, str], bool]) -> None:
        self.report, self.files, self.only, self.tmp = report, files, only, files.tmp
        self.jobs: list[Callable[[], None]] = []
        self.late: list[Callable[[], None]] = []  # the merges: queued after the rest, so that their shards are ready
        self.slow: list[Callable[[], None]] = []  # the longest commands: last, so that the server's timing checks
        # (which wait for the commands in flight) do not wait for them
        self.ready = threading.Event()  # set when the shards' job has ended

    def job(self, item: str, what: str, after_shards: bool = False, last: bool = False):
        def register(check: Callable[[], None]) -> Callable[[], None]:
            if self.only(item, what):
                def run() -> None:
                    self.report.add(item, what, check)
                run.shards = check.__name__ == "make_shards"  # type: ignore[attr-defined]
                (self.late if after_shards else self.slow if last else self.jobs).append(run)
            return check
        return register

    def run_dir(self, tag: str) -> str:
        return f"hydra.run.dir={self.tmp / 'runs' / tag}"

    def refused(self, item: str, what: str, *args: str, says: str | None = None, exact: str | None = None,
                base: tuple[str, ...] = BASE, env: dict[str, str] | None = None) -> None:
        tag = re.sub(r"[^A-Za-z0-9]+", "_", what)[:60] + f"_{len(self.jobs)}"

        @self.job(item, what)
        def check() -> None:
            multirun = ("-m",) if "-m" in args else ()
            rest = [a for a in args if a != "-m"]
            folder = () if any(a.startswith("hydra.run.dir=") for a in rest) else (self.run_dir(tag),)
            one_error(clinprog(*multirun, *base, *rest, *folder, env=env), says=says, exact=exact)


def cli_probes(report: Report, files: Files, only: Callable[[str, str], bool]) -> list[Callable[[], None]]:
    """Each command-line probe as a job for the pool (the slow ones first)."""
    c = _Cli(report, files, only)
    for section in (_multirun_probes, _batch_probes, _fabrications_probes, _merges_probes, _forged_ids_probes,
                    _state_files_probes, _compile_refusals_probes, _inputs_probes, _settings_probes, _threads_probes):
        section(c)
    if not any(getattr(j, "shards", False) for j in c.jobs):
        c.ready.set()  # the shards' job is not among these (--only): the merges fail at once
    return c.jobs + c.late + c.slow


def _multirun_probes(c: _Cli) -> None:
    """Item 4: a multirun whose second job fails (the basic launcher and joblib's)."""
    tmp, job = c.tmp, c.job
    for launcher, extra in (("basic", ()), ("joblib", ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2"))):
        @job("4", f"-m ...threshold=0.3,7,0.5 ({launcher} launcher): jobs 0 and 2 finish, one error line for job #1",
             last=True)
        def multirun(launcher=launcher, extra=extra) -> None:
            sweep = tmp / f"sweep_{launcher}"
            proc = clinprog("-m", *extra, *BASE, "data.limit=1", "program.evidence.threshold=0.3,7,0.5",
                            f"hydra.sweep.dir={sweep}", timeout=170)
            line = one_error(proc, last=False, says="error: multirun job #1 (program.evidence.threshold=7) failed: "
                                                    "program.evidence.threshold must be a number")
            if "1 of 3 multirun jobs failed; the others finished" not in proc.stderr:
                raise Fail(f"no summary line: {proc.stderr[-300:]}")
            for k in (0, 2):
                job_dir = sweep / str(k)
                if not (job_dir / "scores.json").is_file() or (job_dir / "failed.json").exists():
                    raise Fail(f"job {k} did not finish ({sorted(p.name for p in job_dir.glob('*'))}); {line}")
            if not (sweep / "1" / "failed.json").is_file():
                raise Fail("job 1 has no failed.json")


def _batch_probes(c: _Cli) -> None:
    """The batch side of item 2: the default (learned) question stage on a one-"word" 200 KB narrative."""
    files, job, run_dir = c.files, c.job, c.run_dir
    @job("2", "batch run: a 200 KB one-word narrative through the default question stage ends in time", last=True)
    def long_word_batch() -> None:
        word = "".join(random.Random(2).choices(string.ascii_lowercase, k=200_000))

        def edit(cases):
            cases[0].find("patient_narrative").text = word
        cases = files.cases_xml("long_word.xml", edit, keep=1)
        start = time.monotonic()
        ok_run(clinprog("program=archehr", *QUIET, f"data.cases={cases}", "data.key=null", run_dir("long_word"),
                        timeout=120))
        if time.monotonic() - start > 90:
            raise Fail(f"took {time.monotonic() - start:.0f} s")


def _fabrications_probes(c: _Cli) -> None:
    """Item 15: a fabrication set the script did not make, scored per kind."""
    files, job = c.files, c.job
    @job("15", "grounding_eval.py --fabrications FILE scores someone else's set per kind; a bad file is one line",
         last=True)
    def fabrications() -> None:
        doc = {"format": "grounding-fabrications/1", "cases": {
            "903": [{"text": "Her creatinine worsened to 4.1 by discharge.", "citations": ["6"], "kind": "reversed trend"},
                    {"text": "Lisinopril was continued despite hypotension.", "citations": ["4"],
                     "kind": "flipped negation"}],
            "901": [{"text": "She was given 500 mg of aspirin daily.", "citations": ["2"], "kind": "wrong dose"}]}}
        good, bad = files.path("inputs", "fabrications.json"), files.path("inputs", "fabrications_bad.json")
        good.write_text(json.dumps(doc))
        bad.write_text(json.dumps({**doc, "cases": {"903": [{"text": "x", "citations": ["999"], "kind": "k"}]}}))
        args = ("--cases", str(DATA / "bundled_cases.xml"), "--key", str(DATA / "bundled_cases_key.json"),
                "--fabrications")
        one_error(script(ROOT / "benchmarks" / "grounding_eval.py", *args, str(bad)), says="999")
        proc = script(ROOT / "benchmarks" / "grounding_eval.py", *args, str(good))
        ok_run(proc)
        for kind in ("reversed trend", "flipped negation", "wrong dose"):
            if f"| {kind} |" not in proc.stdout or f"recall: {kind}" not in proc.stdout:
                raise Fail(f"no per-kind row/column for {kind!r}: {proc.stdout[-300:]}")


def _merges_probes(c: _Cli) -> None:
    """Items 5 and 9 (and round 3's merge mismatches): shards of a 4-case run, merged damaged."""
    tmp, job = c.tmp, c.job
    shards: dict[str, Path] = {}
    ready = c.ready

    @job("5", "two shards of a 4-case run (the merges below use them)")
    def make_shards() -> None:
        try:
            for k in (0, 1):
                ok_run(clinprog(*BASE, f"data.cases={DATA / 'dev_cases.xml'}", "data.limit=4", "data.num_shards=2",
                                f"data.shard={k}", f"hydra.run.dir={tmp / 'shards' / f's{k}'}"))
                shards[f"s{k}"] = tmp / "shards" / f"s{k}"
        finally:
            ready.set()

    def merge(*dirs: Path, out: Path) -> subprocess.CompletedProcess:
        return clinprog("task=merge", f"dirs=[{','.join(str(d) for d in dirs)}]", f"hydra.run.dir={out}")

    def both_shards() -> tuple[Path, Path]:
        """The two shard folders, once make_shards has finished (a probe that needs them fails if it could not)."""
        if not ready.wait(300) or len(shards) < 2:
            raise Fail("no shards to merge (their runs failed)")
        return shards["s0"], shards["s1"]

    def damaged(tag: str, name: str, content: Callable[[Path], str]) -> Path:
        _, s1 = both_shards()
        copy = tmp / "damaged" / tag
        shutil.copytree(s1, copy)
        (copy / name).write_text(content(s1))
        return copy

    def merge_refused(item: str, what: str, name: str, content: Callable[[Path], str], says: str) -> None:
        tag = f"m{len(c.late)}"

        @job(item, what, after_shards=True)
        def check() -> None:
            copy = damaged(tag, name, content)
            out = tmp / "merged" / tag
            one_error(merge(shards["s0"], copy, out=out), says=says)
            if (out / "predictions.jsonl").exists():
                raise Fail("the refused merge wrote predictions.jsonl")

    def without(fields: tuple[str, ...]) -> Callable[[Path], str]:
        def content(folder: Path) -> str:
            lines = (folder / "predictions.jsonl").read_text().splitlines()
            record = json.loads(lines[0])
            for f in fields:
                record.pop(f)
            return "\n".join([json.dumps(record), *lines[1:]]) + "\n"
        return content

    merge_refused("5", "merge of a shard whose record lacks answer and evidence_ids is one error line",
                  "predictions.jsonl", without(("answer", "evidence_ids")), "lacks evidence_ids, answer")
    for content, says in (([], "a JSON array, not an object"), ("x", "a JSON string, not an object"),
                          ({"data": "x"}, "its data is a JSON string, not an object")):
        merge_refused("9", f"merge of a shard whose config.json is {json.dumps(content)} is one error line",
                      "config.json", lambda _f, c=content: json.dumps(c), says)
    merge_refused("9", "merge of a shard whose fingerprint.json is [1] is one error line", "fingerprint.json",
                  lambda _f: "[1]", "a JSON array, not an object")
    merge_refused("r3", "merge of a shard whose config.json is JSON nested 100,000 deep is one error line",
                  "config.json", lambda _f: "[" * 100_000 + "]" * 100_000, "config.json")

    @job("5", "merge into one of its own shards (hydra.run.dir=<shard>) is refused and the shard is unchanged",
         after_shards=True)
    def merge_into_shard() -> None:
        s0, s1 = both_shards()
        before = {p: p.read_bytes() for p in s0.rglob("*") if p.is_file()}
        one_error(merge(s0, s1, out=s0), says="the merge would overwrite it")
        after = {p: p.read_bytes() for p in s0.rglob("*") if p.is_file()}
        if after != before:
            raise Fail(f"the shard changed: {sorted(str(p.name) for p in set(after) ^ set(before) or after)[:5]}")

    @job("r3", "merge mismatches: a missing shard and a shard given twice are one error line each; both shards merge",
         after_shards=True)
    def merge_mismatches() -> None:
        s0, s1 = both_shards()
        one_error(merge(s0, out=tmp / "merged" / "gap"), says="a gap: shard 1 of 2")
        twice = merge(s0, s0, out=tmp / "merged" / "twice")  # an overlap, and so a gap: a line for each
        no_traceback(twice)
        if twice.returncode != 2 or "error: an overlap: shard 0 of 2 is in 2 folders" not in twice.stderr or any(
                not line.startswith("error: ") for line in twice.stderr.strip().splitlines()):
            raise Fail(f"shard 0 twice: exit {twice.returncode}: {twice.stderr[-300:]}")
        proc = merge(s0, s1, out=tmp / "merged" / "good")
        ok_run(proc)
        lines = (tmp / "merged" / "good" / "predictions.jsonl").read_text().splitlines()
        if len(lines) != 4:
            raise Fail(f"the merge holds {len(lines)} records, not 4")
        for k in (2, 3, 4):
            got = json.loads((tmp / "merged" / "good" / f"submission_subtask_{k}.json").read_text())
            if len(got) != 4:
                raise Fail(f"submission_subtask_{k}.json holds {len(got)} cases, not 4")


def _forged_ids_probes(c: _Cli) -> None:
    """Item 7: case ids that try to forge log lines."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    def forge(cases):
        cases[0].set("id", f"x\n{FORGED} 1")
        cases[1].set("id", f"y\r\n{FORGED} 2")
        cases[2].set("id", f"z\n{FORGED} 3")
        cases[2].remove(cases[2].find("note_excerpt_sentences"))

    @job("7", "case ids holding a newline and a log prefix write no forged line (shard slice, resume, loader)")
    def log_forging() -> None:
        forged = files.cases_xml("forged.xml", forge, source=DATA / "dev_cases.xml", keep=3)
        shard = tmp / "runs" / "forged_shard"
        ok_run(clinprog(*BASE, f"data.cases={forged}", "data.num_shards=2", "data.shard=0", f"hydra.run.dir={shard}"))
        run = tmp / "runs" / "forged_run"
        ok_run(clinprog(*BASE, f"data.cases={forged}", f"hydra.run.dir={run}"))
        again = clinprog(*BASE, f"data.cases={forged}", "data.limit=1", f"hydra.run.dir={run}")
        ok_run(again)
        for where, text in (("the shard's main.log", (shard / "main.log").read_text()),
                            ("the run's main.log", (run / "main.log").read_text()),
                            ("the rerun's output", again.stdout + again.stderr)):
            if forged_lines(text):
                raise Fail(f"{where} holds a forged line: {forged_lines(text)[0]!r}")
        if r"x\n[2026-01-01" not in (shard / "main.log").read_text():
            raise Fail("the shard's main.log does not name the escaped id (was the slice line written?)")

    @job("7", "an error naming a forged case id (a duplicate sentence id) is one line")
    def forged_error() -> None:
        def edit(cases):
            forge(cases)
            sentences = cases[0].find("note_excerpt_sentences")
            sentences.append(sentences.findall("sentence")[0])
        broken = files.cases_xml("forged_duplicate.xml", edit, source=DATA / "dev_cases.xml", keep=3)
        proc = clinprog(*BASE, f"data.cases={broken}", run_dir("forged_error"))
        one_error(proc, says=r"case x\n[2026-01-01")
        if forged_lines(proc.stdout + proc.stderr):
            raise Fail("a forged line on stdout/stderr")


def _state_files_probes(c: _Cli) -> None:
    """Item 10 and 6: learned state files that do not fit the code."""
    files, job, run_dir = c.files, c.job, c.run_dir
    for what, edit, says in (
            ("every scale = 0", lambda d: d["evidence.scorer"].__setitem__(
                "scale", [0.0] * len(d["evidence.scorer"]["scale"])), "scale of 0"),
            ("scorer: []", lambda d: d.__setitem__("evidence.scorer", []), "program.compiled="),
            ("selection: [1,2,3]", lambda d: d["evidence.scorer"].__setitem__("selection", [1, 2, 3]),
             "selection must map names"),
            ('threshold: "abc"', lambda d: d["evidence.scorer"]["selection"].__setitem__("threshold", "abc"),
             "selection must map names"),
            ("a renamed feature (says what differs)", lambda d: d["evidence.scorer"]["features"].__setitem__(
                0, "renamed"), "new here: ['")):
        item = "6" if "scale" in what else "10"

        @job(item, f"a state file with {what} is one error line")
        def state_file(what=what, edit=edit, says=says) -> None:
            path = files.state(re.sub(r"\W+", "_", what) + ".json", edit)
            one_error(clinprog(*BASE, f"program.compiled={path}", "data.limit=1", run_dir(path.stem)), says=says)

    @job("10", "program.compiled=X whose X.meta.json is not JSON is one error line")
    def bad_meta() -> None:
        path = files.path("inputs", "badmeta", "state.json")
        shutil.copy(DATA / "compiled_program.json", path)
        path.with_name("state.json.meta.json").write_text("{not json")
        one_error(clinprog(*BASE, f"program.compiled={path}", "data.limit=1", run_dir("badmeta")),
                  says="meta.json: not JSON")


def _compile_refusals_probes(c: _Cli) -> None:
    """Item 11: compile refusals."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    @job("11", "task=compile on a key without clinician_answer_sentences is one error line")
    def compile_no_answers() -> None:
        key = json.loads((DATA / "dev_cases_key.json").read_text())
        for case in key:
            case.pop("clinician_answer_sentences", None)
        path = files.path("inputs", "key_without_answers.json")
        path.write_text(json.dumps(key))
        one_error(clinprog(*BASE, "task=compile", "optimizer=logistic", f"data.train={DATA / 'dev_cases.xml'}",
                           f"data.train_key={path}", f"program.optimize.save_to={tmp / 'compiled' / 'x.json'}",
                           run_dir("compile_no_answers")), says="clinician_answer_sentences")

    @job("11", "task=compile with program.optimize.save_to=<a folder> is refused before fitting")
    def compile_save_to_folder() -> None:
        folder = files.path("compiled", "a_folder", "x").parent
        start = time.monotonic()
        one_error(clinprog(*BASE, "task=compile", "optimizer=logistic", f"data.train={DATA / 'dev_cases.xml'}",
                           f"data.train_key={DATA / 'dev_cases_key.json'}", f"program.optimize.save_to={folder}",
                           run_dir("compile_folder")), says="must name a .json file")
        if time.monotonic() - start > 30:
            raise Fail(f"refused only after {time.monotonic() - start:.0f} s (after fitting?)")


def _inputs_probes(c: _Cli) -> None:
    """Round 3 and earlier: inputs."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    @job("r3", "path traversal in case ids (../../escape) writes nothing outside the run folder")
    def traversal() -> None:
        def edit(cases):
            for k, case in enumerate(cases):
                case.set("id", f"../../escape-{k}" if k else "/tmp/../../escape-abs")
        cases = files.cases_xml("traversal.xml", edit)
        run = tmp / "runs" / "a" / "b" / "traversal"
        outside_before = {p for p in tmp.rglob("*") if run not in p.parents and p != run}
        ok_run(clinprog(*BASE, f"data.cases={cases}", "data.key=null", f"hydra.run.dir={run}"))
        new = {p for p in tmp.rglob("*") if run not in p.parents and p != run} - outside_before
        escaped = sorted(str(p) for p in new if "escape" in p.name)
        if escaped or list(Path("/tmp").glob("escape-*")) or list(ROOT.glob("escape-*")):
            raise Fail(f"files outside the run folder: {escaped or 'under /tmp or the repository'}")

    for name, text in (("billion laughs", laughs_text()), ("XXE (file:///etc/passwd)", xxe_text())):
        @job("r3", f"a cases file with {name} is one error line")
        def hostile_xml(name=name, text=text) -> None:
            path = files.path("inputs", re.sub(r"\W+", "_", name) + ".xml")
            path.write_text(text)
            line = one_error(clinprog(*BASE, f"data.cases={path}", run_dir(path.stem)), says=str(path))
            if "root:" in line:
                raise Fail("the error line quotes /etc/passwd")

    @job("r3", "a key file of JSON nested 100,000 deep is one error line")
    def deep_key() -> None:
        path = files.path("inputs", "deep_key.json")
        path.write_text("[" * 100_000 + "]" * 100_000)
        one_error(clinprog(*BASE, f"data.key={path}", run_dir("deep_key")), says=str(path))

    @job("r3", "evaluating submission files of JSON nested 100,000 deep: each subtask invalid, not scored")
    def deep_submission() -> None:
        folder = files.path("inputs", "deep_submission", "x").parent
        for k in (1, 2, 3, 4):
            (folder / f"submission_subtask_{k}.json").write_text("[" * 100_000 + "]" * 100_000)
        proc = clinprog(*BASE, "task=evaluate", f"data.submissions={folder}", run_dir("deep_submission"))
        ok_run(proc)
        for k in (1, 2, 3, 4):
            if f"subtask_{k}: invalid submission, not scored: {folder / f'submission_subtask_{k}.json'}: cannot " \
                    "read submission" not in proc.stdout + proc.stderr:
                raise Fail(f"subtask {k} is not reported invalid: {proc.stdout[-300:]}")

    @job("r3", "evaluating submissions with an integer case_id and a repeated case id: no traceback, every subtask "
               "scored or named invalid")
    def odd_submissions() -> None:
        folder = files.path("inputs", "odd_submission", "x").parent
        ids = ["901", "902", "903"]
        predictions = {1: lambda c: "Why?", 2: lambda c: ["2"], 3: lambda c: "An answer.",
                       4: lambda c: [{"answer_id": "1", "evidence_id": ["2"]}]}
        for k, make in predictions.items():
            entries = [{"case_id": c, "prediction": make(c)} for c in ids]
            if k == 1:
                entries[1]["case_id"] = 902  # an integer id: the official subtask fails on it
            if k == 2:
                entries.append({"case_id": "901", "prediction": ["3"]})  # twice: the official scripts score both
            (folder / f"submission_subtask_{k}.json").write_text(json.dumps(entries))
        proc = clinprog(*BASE, "task=evaluate", f"data.submissions={folder}", run_dir("odd_submission"))
        ok_run(proc)
        for k in (1, 2, 3, 4):
            if f"subtask_{k}:" not in proc.stdout + proc.stderr:
                raise Fail(f"subtask {k} neither scored nor named invalid: {proc.stdout[-300:]}")
        if "case ids written more than once in the submission: 901 (2 times)" not in proc.stdout:
            raise Fail("the repeated case id is not named")

    @job("r3", "a predictions.jsonl line nested 100,000 deep (a resumed run) is one error line naming file:line")
    def deep_record() -> None:
        run = tmp / "runs" / "deep_record"
        ok_run(clinprog(*BASE, "data.limit=2", f"hydra.run.dir={run}"))
        path = run / "predictions.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n".join(["[" * 100_000 + "]" * 100_000, *lines[1:]]) + "\n")
        one_error(clinprog(*BASE, "data.limit=2", f"hydra.run.dir={run}"), says=f"{path}:1")

    @job("r3", "a stale run.lock (echo 1 > run.lock) is taken over with a warning")
    def stale_lock() -> None:
        run = files.path("runs", "stale_lock", "run.lock").parent
        (run / "run.lock").write_text("1\n")
        proc = clinprog(*BASE, "data.limit=1", f"hydra.run.dir={run}")
        ok_run(proc)
        if not (run / "predictions.jsonl").is_file():
            raise Fail("no predictions written")

    @job("r3", "a rerun with a changed config is refused in one line and keeps .hydra/config.yaml")
    def changed_rerun() -> None:
        run = tmp / "runs" / "changed"
        ok_run(clinprog(*BASE, "data.limit=1", f"hydra.run.dir={run}"))
        before = (run / ".hydra" / "config.yaml").read_bytes()
        one_error(clinprog(*BASE, "data.limit=1", "program.evidence.threshold=0.9", f"hydra.run.dir={run}"),
                  says="threshold")
        if (run / ".hydra" / "config.yaml").read_bytes() != before:
            raise Fail(".hydra/config.yaml was rewritten by the refused rerun")

    @job("r3", "an API key never appears in the error line of an unreachable LM server")
    def leaked_key() -> None:
        dead = free_port()
        proc = clinprog(*QUIET, "program=archehr", "lm=openai_compatible", f"lm.client.api_base=http://127.0.0.1:{dead}/v1",
                        "lm.client.api_key_env=PROBE_LM_KEY", "lm.client.num_retries=0", "data.limit=1",
                        f"cache_dir={tmp / 'lmcache'}", run_dir("leaked_key"),
                        env={"PROBE_LM_KEY": "sk-probe-secret-4242"})
        line = one_error(proc, says="127.0.0.1")
        if "sk-probe-secret-4242" in proc.stdout + proc.stderr:
            raise Fail(f"the key is printed: {line}")

    @job("14", "a MEDIQA-CORR CSV with a 1 MB cell is one error line naming its row")
    def big_cell() -> None:
        import csv
        path = files.path("inputs", "big_cell.csv")
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["Text ID", "Text", "Sentences"])
            for k in range(1, 4):
                writer.writerow([f"n{k}", "x" * 1_000_000 if k == 3 else f"Note {k}.", f"0 Note {k}.\n1 It is fine."])
        one_error(clinprog("program=mediqa_corr", *QUIET, f"data.path={path}", run_dir("big_cell")),
                  says=f"{path}, row 4: malformed CSV")


def _settings_probes(c: _Cli) -> None:
    """One-line refusals of settings (items 6, 8, 12, 13 and round 3)."""
    files, job, refused = c.files, c.job, c.refused
    for override, says in (("program.answer.max_words=0", "program.answer.max_words must be"),
                           ("program.answer.max_words=-5", "program.answer.max_words must be")):
        refused("6", override, override, says=says)
    a_file = files.path("inputs", "a_file")
    a_file.write_text("x")

    @job("8", "hydra.run.dir under a file is one error line and the file is unchanged")
    def under_a_file() -> None:
        one_error(clinprog(*BASE, "data.limit=1", f"hydra.run.dir={a_file / 'sub'}"),
                  exact=f"error: hydra.run.dir={a_file / 'sub'}: {a_file} is a file, not a folder; choose a folder "
                        "for the run's outputs")
        if a_file.read_text() != "x":
            raise Fail("the file was changed")

    refused("8", "hydra.run.dir=/proc", "data.limit=1", "hydra.run.dir=/proc/clinprog-probe",
            says="cannot create or write that folder")
    refused("8", "hydra.sweep.dir under a file (-m)", "-m", "data.limit=1", f"hydra.sweep.dir={a_file / 'm'}",
            says="is a file, not a folder")
    refused("r3", "hydra.run.dir naming an existing file", "data.limit=1", f"hydra.run.dir={a_file}", says=str(a_file))
    for override, says in (("executor.num_workers=abc", "executor.num_workers must be an integer >= 1, not 'abc'"),
                           ("executor.num_workers=0", "executor.num_workers must be an integer >= 1, not 0"),
                           ("executor.cpus_per_worker=abc", "executor.cpus_per_worker must be a number of CPUs > 0"),
                           ("executor.object_store_mb=abc", "executor.object_store_mb must be an integer >= 75")):
        refused("8", override, "data.limit=1", "executor=ray", override, says=f"error: {says}")
    for override in ("program.evidence.threshold=abc", "program.evidence.min_selected=abc"):
        refused("12", override, override, says=override.split("=")[0])
    refused("12", "program.question.max_words=abc (the default question stage)", "program.question.max_words=abc",
            base=("program=archehr", *QUIET), says="program.question.max_words")
    for override in ("serve.max_concurrency=0", "serve.max_concurrency=-1", "serve.max_concurrency=abc",
                     "serve.port=abc", "serve.port=99999", "serve.max_queue=-5", "serve.timeout_s=-1",
                     "serve.max_request_bytes=-1"):
        key = override.split("=")[0]
        refused("12", override, "task=serve", override, base=(), says=f"error: {key} must be ")
    refused("13", "program.evidnce.threshold=0.4 names the closest key", "program.evidnce.threshold=0.4", base=(),
            exact="error: program.evidnce.threshold: no such key in the config; did you mean "
                  "program.evidence.threshold?")
    refused("13", "lm=gemeni names the closest option", "lm=gemeni", base=(), says="did you mean lm=gemini?")
    refused("13", "an override nested 300 levels deep (+x=[[[...]]]) is one error line", "+x=" + "[" * 300 + "]" * 300,
            base=(), says="+x: a value nested 300 levels deep")
    for value in ("abc", "-1", "0", "1.5"):
        refused("r3", f"data.limit={value}", f"data.limit={value}", says="data.limit")


def _threads_probes(c: _Cli) -> None:
    """#36 items 8 and 9: the threads variable is checked and never shown (the rest: tests/test_hostile_inputs.py)."""
    refused = c.refused
    for value in ("", "two", "${oc.env:HOME}"):
        refused("36", f"CLINPROG_LLAMA_THREADS={value!r} is one line that shows no value", "data.limit=1",
                base=("program=archehr", *QUIET), env={"CLINPROG_LLAMA_THREADS": value},
                exact="error: CLINPROG_LLAMA_THREADS must be auto or a whole number from 1 to 256 (its value is not "
                      "shown)")
    for value in ("0", "lots"):  # #54: a ConfigError inside Hydra's instantiate was a Hydra traceback
        refused("54", f"program.embedder.threads={value} is one line", f"program.embedder.threads={value}",
                "data.limit=1", base=("program=archehr", *QUIET),
                exact=f"error: embedder.threads must be auto or an integer from 1 to 256, not '{value}'")
    refused("54", "program.grounding.judge=lm under grounding=none names the options that have it",
            "program.grounding.judge=lm", base=("program=archehr", *QUIET), says="parameters: none); it belongs to")


# --- the serving probes (items 1-3, 14 and the earlier rounds' HTTP cases) --------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
        Workers.kill(self.process)


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


def _serve_load_checks(check: Callable, answered: Callable, tmp: Path) -> None:
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


def _serve_protocol_checks(check: Callable, answered: Callable, tmp: Path) -> None:
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

    _serve_load_checks(check, answered, tmp)
    _serve_protocol_checks(check, answered, tmp)

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


def laughs_text() -> str:
    entities = "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(2, 10))
    return (f'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol1 "lol">{entities}]><annotations><case id="1">'
            "<patient_narrative>&lol9;</patient_narrative></case></annotations>")


def xxe_text() -> str:
    return ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><annotations><case id="1">'
            "<patient_narrative>&xxe;</patient_narrative></case></annotations>")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="command-line probes at a time (besides the server)")
    parser.add_argument("--only", default=None, help="only the probes whose item and description contain one of "
                                                      "these (comma-separated)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    parser.add_argument("--times", action="store_true", help="then the seconds of the slowest probes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return 0
    global WORKERS
    wanted = [w for w in (args.only or "").split(",") if w]

    def only(item: str, what: str) -> bool:
        return not wanted or any(w in f"{item} {what}" for w in wanted)

    tmp = Path(tempfile.mkdtemp(prefix="clinprog-probe-"))
    report = Report()
    start = time.monotonic()
    try:
        WORKERS = Workers(args.jobs, tmp / "workers.log")
        jobs = cli_probes(report, Files(tmp), only)
        with ThreadPoolExecutor(args.jobs + 1) as pool:
            serving = pool.submit(serve_probes, report, tmp, only)
            for future in [pool.submit(j) for j in jobs]:
                future.result()
            serving.result()
    finally:
        if WORKERS is not None:
            WORKERS.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [r for r in report.results if r.problem is not None]
    print(f"{len(report.results) - len(failed)} of {len(report.results)} probes ok, {len(failed)} failed "
          f"({time.monotonic() - start:.0f} s wall)" + (": " + ", ".join(f"{r.item} {r.what[:40]}" for r in failed)
                                                          if failed else ""))
    if args.times:
        for r in sorted(report.results, key=lambda r: -r.seconds)[:15]:
            print(f"{r.seconds:6.1f} s  {r.item} {r.what[:90]}")
    return 0 if report.results and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
