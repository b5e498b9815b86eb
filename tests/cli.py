"""The one way tests run clinprog as a user does (`python main.py ...`), and a fake LM server.

`run_main` is the CLI helper every test of a command uses (in this process unless `process=True`); `quiet=True`
adds the flags most tests want (no progress bars, no BERTScore model). `fake_openai_server` is a real HTTP server
on 127.0.0.1 speaking enough of the OpenAI API (`GET /v1/models`, `POST /v1/chat/completions`) for
`lm=openai_compatible`: `reply(last message) -> content`.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET = ("progress=false", "metrics.bertscore=null")


def run_main(*args: str, cwd: str | Path = ROOT, env: dict[str, str | None] | None = None, timeout: float = 900,
             quiet: bool = False, process: bool = False) -> subprocess.CompletedProcess:
    """`python main.py *args` (from `cwd`), offline (HF_HUB_OFFLINE=1), output captured as text.

    In this process by default (the same `@hydra.main` entry, its exit code, stdout and stderr); `process=True` starts
    a real Python where the process is the point (exit on a signal, third-party output on file descriptors, Ray).
    `env` is added to the environment; a None value unsets that variable. `timeout` bounds a real process only."""
    argv = [*args, *(QUIET if quiet else ())]
    merged = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    environment = {k: v for k, v in merged.items() if v is not None}
    if process:
        return subprocess.run([sys.executable, str(ROOT / "main.py"), *argv], capture_output=True, text=True,
                              cwd=cwd, timeout=timeout, env=environment)
    return main_in_process(argv, cwd=cwd, env=environment)


def _shield_absl_stream() -> None:
    """absl (rouge-score's logger) closes its handler's stream on `logging.shutdown` unless that stream is the
    *current* sys.stderr; Hydra's logging setup shuts every handler down while sys.stderr is a run's capture buffer,
    so absl would close whichever stream it holds (pytest's own, or an earlier run's). In a process that shutdown
    happens once, at exit; in here the handler only flushes, and writes to the process's stderr (fd 2)."""
    import absl.logging

    handler = absl.logging.get_absl_handler().python_handler
    handler.stream = sys.__stderr__
    handler.close = handler.flush


def exit_code_of(run: Callable[[], object]) -> int:
    """Run `run` as the interpreter runs a script and return the exit code it would have: a SystemExit's code (a
    string one printed to stderr, then 1), 1 with the traceback for any other exception, else 0."""
    try:
        run()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # noqa: BLE001 - what the interpreter would print before exiting 1
        traceback.print_exc()
        return 1
    return 0


def main_in_process(argv: list[str], cwd: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `main.cli()` with `sys.argv`, the environment (`env`, whole), the working directory and the root logger as
    a fresh process would have them, and restore all four after."""
    from hydra.core.global_hydra import GlobalHydra

    import main as entry

    _shield_absl_stream()
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [str(ROOT / "main.py"), *argv]
    GlobalHydra.instance().clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = exit_code_of(entry.cli)
    finally:
        GlobalHydra.instance().clear()
        for handler in root.handlers[:]:
            if handler not in saved_handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in saved_handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(saved_level)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["main.py", *argv], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def fake_openai_server(reply: Callable[[str], str | int], model: str = "m", delay_s: float = 0.0) -> Iterator[dict]:
    """Serve `model`; each chat completion answers `reply(<the request's last message>)` after `delay_s` seconds
    (an int reply is an HTTP error status instead)
    (a slow LM makes a run long enough to interrupt, whatever the machine). Yields
    {"api_base": ..., "requests": [request bodies], "overrides": (the lm=openai_compatible overrides)}."""
    seen: dict = {"requests": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - /v1/models
            self._send(200, {"object": "list", "data": [{"id": model}]})

        def do_POST(self):  # noqa: N802 - /v1/chat/completions
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            seen["requests"].append(body)
            time.sleep(delay_s)
            text = str((body.get("messages") or [{}])[-1].get("content"))
            content = reply(text)
            if isinstance(content, int):  # an HTTP error status (e.g. 503: the client retries)
                self._send(content, {"error": {"message": f"status {content}"}})
                return
            self._send(200, {"id": "x", "object": "chat.completion", "created": 1, "model": model,
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": content}}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["api_base"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    seen["overrides"] = ("lm=openai_compatible", f"lm.client.model={model}", f"lm.client.api_base={seen['api_base']}",
                         "lm.client.cache=false")
    try:
        yield seen
    finally:
        server.shutdown()
