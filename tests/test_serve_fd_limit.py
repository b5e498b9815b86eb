"""`task=serve` out of file descriptors: a server process with a low open-file limit (the limit is the process's, so
the process is the point) under a flood of connections that never send a byte. Its accept() fails with `Too many
open files` while they are open; the log must say so in a line or two (counted, no traceback per failed accept), the
server must close the idle connections (serve.read_timeout_s) and answer again."""

import math
import socket
import subprocess
import sys
import time

import httpx
import pytest

from lms.local_server import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SERVER = """
import resource, sys
import uvicorn
from omegaconf import OmegaConf
from common.settings import serve_settings
from serving.app import create_app
from serving.protocol import server_args
from tests.test_serve_abuse import Slow, SlowProgram

port, limit = int(sys.argv[1]), int(sys.argv[2])
cfg = OmegaConf.create({"serve": {"max_connections": 1000, "read_timeout_s": 1.5, "keep_alive_s": 1},
                        "lm": {"client": None}, "program": {"name": "slow"}})
app = create_app(cfg, Slow(), SlowProgram())
import uvicorn.loops.auto, uvicorn.lifespan.on, uvicorn.protocols.websockets.auto  # noqa: E401 - before the limit
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
uvicorn.run(app, **{**server_args(serve_settings(cfg)), "port": port})
"""


def test_accept_out_of_file_descriptors_is_logged_once_and_the_server_recovers(tmp_path):
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "96"], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    flood: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        flood = [socket.create_connection(("127.0.0.1", port)) for _ in range(400)]  # far over the 96 descriptors
        time.sleep(3)  # accept() fails while they are open: retried every second
        for sock in flood:
            sock.close()
        deadline = time.monotonic() + 30
        while True:  # the idle ones are closed after serve.read_timeout_s, the backlog is accepted and closed too
            try:
                health = httpx.get(f"{url}/health", timeout=2)
                if health.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(0.3)
        counts = health.json()["connection_errors"]
        failed = [n for kind, n in counts.items() if "out of system resource" in kind and "errno 24" in kind]
        assert failed and failed[0] >= 1, counts
    finally:
        for sock in flood:
            sock.close()
        proc.terminate()
        proc.wait(timeout=20)
    text = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in text, text[-3000:]
    said = [line for line in text.splitlines() if "Too many open files" in line or "out of system resource" in line]
    # the first failure in full, then one line at 10, 100, 1000, ... (asyncio retries a failed accept thousands of
    # times a second: a line each was the 1.8 M-line log)
    assert "Too many open files" in said[0] and "logged once" in said[0], said
    assert len(said) <= 2 + math.log10(failed[0]), said
