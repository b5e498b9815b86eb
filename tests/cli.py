"""How tests run clinprog, and a fake LM server.

`dispatch_run` composes the config and calls the dispatcher in this process, as lightning-hydra-template's tests
compose and call `train(cfg)`: most tests. `composition_error` is the line `main.cli()` prints for a command line Hydra
cannot compose. `run_main` starts `python main.py ...` as a user does, for what only a process shows (Hydra's
callbacks and .hydra files, multiruns and launchers, signals, locks, output on file descriptors); `main_command` is
its command line, for a test that starts and signals it. `quiet=True` adds the flags most tests want (no progress
bars, no BERTScore model). `fake_openai_server` is a real HTTP server on 127.0.0.1 speaking enough of the OpenAI API
(`GET /v1/models`, `POST /v1/chat/completions`) for `lm=openai_compatible`: `reply(last message) -> content`.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUIET = ("progress=false", "metrics.bertscore=null")


def run_main(*args: str, cwd: str | Path = ROOT, env: dict[str, str | None] | None = None, timeout: float = 900,
             quiet: bool = False) -> subprocess.CompletedProcess:
    """`python main.py *args` as a real process (from `cwd`), offline (HF_HUB_OFFLINE=1), output captured as text:
    for what only a process shows. `env` is added to the environment; a None value unsets that variable."""
    merged = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    environment = {k: v for k, v in merged.items() if v is not None}
    return subprocess.run(main_command(*args, *(QUIET if quiet else ())), capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=environment)


def main_command(*args: str) -> list[str]:
    """The command line of `python main.py *args` (this interpreter), for a test that starts and signals it."""
    return [sys.executable, str(ROOT / "main.py"), *args]


@dataclass
class Dispatched:
    """What `dispatch(cfg)` did: what it returned, its exit code (a SystemExit's; 0 when none), what it printed."""

    value: float | None
    returncode: int
    stdout: str
    stderr: str


def composed(*overrides: str):
    """conf/config.yaml composed with `overrides` by Hydra's compose API, Hydra's own node included."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def dispatch_run(*overrides: str, quiet: bool = False) -> Dispatched:
    """Compose the config with `overrides` and call `runners.dispatch.dispatch` with it, as `python main.py` does once
    Hydra has composed: the run folder is `hydra.run.dir` (created, as Hydra does) and HydraConfig is set, as the
    tasks read it. An unexpected exception propagates; Hydra's callbacks, its .hydra files and log handlers are not
    run (a test of those starts a process: `run_main`; log lines: pytest's caplog)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict, read_write

    from runners.dispatch import dispatch

    cfg = composed(*overrides, *(QUIET if quiet else ()))
    folder = Path(str(cfg.hydra.run.dir)).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    with read_write(cfg.hydra.runtime):
        cfg.hydra.runtime.output_dir = str(folder)
    HydraConfig.instance().set_config(cfg)
    task_cfg = cfg.copy()
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]  # the task sees the config without Hydra's own node, as under @hydra.main
    out, err = io.StringIO(), io.StringIO()
    value, code = None, 0
    # the dispatcher filters the root logger's handlers (Hydra's, in a process; here pytest's, which later tests
    # read through caplog): they get their own filters back
    filters = {handler: handler.filters[:] for handler in logging.getLogger().handlers}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            value = dispatch(task_cfg)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        HydraConfig.instance().cfg = None
        for handler, kept in filters.items():
            handler.filters[:] = kept
    return Dispatched(value, code, out.getvalue(), err.getvalue())


def composition_error(*overrides: str) -> str:
    """The `error:` line `main.cli()` prints for a command line Hydra cannot compose: compose raises, and
    common/overrides.config_mistake names the closest valid key, group or option."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    from common.overrides import config_mistake

    try:
        composed(*overrides)
    except (ConfigCompositionException, MissingConfigException, OverrideParseException) as exc:
        return f"error: {config_mistake(list(overrides), exc)}"
    raise AssertionError(f"Hydra composed {overrides}")


def one_error_line(proc: subprocess.CompletedProcess | Dispatched) -> str:
    """The command's (or the dispatch's) stderr, which must be exactly one `error:` line (exit 2, no traceback)."""
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
