"""A `task=serve` process for tests: started on a free port, ready when `/health` answers, killed at the end."""

from __future__ import annotations

import os
import subprocess
import time

import httpx

from lms.local_server import free_port
from tests.cli import main_command
from tests.conftest import ROOT


class Server:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            main_command("task=serve", f"serve.port={self.port}", *args),
            cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                if self.process.poll() is not None:
                    raise RuntimeError(self.process.stderr.read()[-2000:]) from None
                time.sleep(0.3)
        raise RuntimeError("task=serve did not start")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
