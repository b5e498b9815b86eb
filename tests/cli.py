"""The one way tests run clinprog as a user does (`python main.py ...`), and a fake LM server.

`run_main` is the CLI helper every test of a command uses (in this process unless `process=True`); `quiet=True`
adds the flags most tests want (no progress bars, no BERTScore model). `fake_openai_server` is a real HTTP server
on 127.0.0.1 speaking enough of the OpenAI API (`GET /v1/models`, `POST /v1/chat/completions`) for
`lm=openai_compatible`: `reply(last message) -> content`.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.in_process import exit_code_of, main_in_process  # noqa: F401 (re-exported: the tests' helpers)

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


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The command's stderr, which must be exactly one `error:` line (exit 2, no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


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
