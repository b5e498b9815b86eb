"""Run `python main.py ...` for a benchmark, offline, into a fresh folder; stop the benchmark on failure."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_main(*args: str, out: Path | None = None, prefix: str = "clinprog_bench_") -> Path:
    """The run folder of `python main.py <args>` (a new temporary one unless `out` is given)."""
    out = out or Path(tempfile.mkdtemp(prefix=prefix))
    cmd = [sys.executable, str(ROOT / "main.py"), *args, "progress=false", f"hydra.run.dir={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return out
