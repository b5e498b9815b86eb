"""Where the test suite's time goes: the README's test command with each test's wall time and CPU recorded, by tier.

    python benchmarks/suite_cost.py [--top 15] [--out FILE] [-- PYTEST_ARGS...]

Runs `python -m pytest` (by default the README's arguments: `-n auto --dist loadfile`) with this module as a pytest
plugin (`-p benchmarks.suite_cost`). Each test records, in the xdist worker that ran it, its wall time, the worker's
own CPU seconds and the CPU of the worker's children reaped during the test (a process a test starts and waits for;
a module-scoped server is reaped, and counted, at its module's last test). Prints, for each tier (unit, integration,
lm) and for the modules that cost most: worker-seconds (the sum of the tests' wall times), CPU seconds, tests; then
the session's wall time and the CPU of the whole process tree, and the floor they imply: on N cores no schedule runs
the suite in less than its CPU seconds / N. Time it on a quiet machine; the shares, not the seconds, carry over to
another CPU.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = "CLINPROG_SUITE_COST_DIR"  # where the plugin, in each xdist worker, appends its records
TIERS = ("unit", "integration", "lm")


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ARG001 - pytest's signature
    """The plugin: one JSON line per test (setup, call and teardown together) in $CLINPROG_SUITE_COST_DIR."""
    folder = os.environ.get(OUT_DIR)
    wall, (own, children) = time.perf_counter(), _cpu()
    yield
    if not folder:
        return
    own_after, children_after = _cpu()
    tier = next((m.name for m in item.iter_markers() if m.name in TIERS), "none")
    record = {"test": item.nodeid, "tier": tier, "wall_s": time.perf_counter() - wall, "cpu_s": own_after - own,
              "children_cpu_s": children_after - children}
    _append(folder, record)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A failed test (or its setup or teardown) is named in the report: its time counts all the same."""
    folder = os.environ.get(OUT_DIR)
    if folder and report.failed:
        _append(folder, {"failed": report.nodeid, "when": report.when})


def _append(folder: str, record: dict[str, Any]) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(folder) / f"{worker}.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def summarize(records: list[dict[str, Any]], top: int) -> list[str]:
    """The tiers' and the costliest modules' worker-seconds, CPU seconds and test counts."""
    def table(key: Callable[[dict[str, Any]], str]) -> list[tuple[str, float, float, int]]:
        sums: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
        for r in records:
            row = sums[key(r)]
            row[0] += r["wall_s"]
            row[1] += r["cpu_s"] + r["children_cpu_s"]
            row[2] += 1
        return sorted(((k, w, c, int(n)) for k, (w, c, n) in sums.items()), key=lambda row: -row[2])

    total_cpu = sum(r["cpu_s"] + r["children_cpu_s"] for r in records) or 1.0
    lines = [f"{'':44} {'worker-s':>9} {'CPU s':>8} {'share':>6} {'tests':>6}"]
    for title, rows in (("tier", table(lambda r: r["tier"])),
                        ("module", table(lambda r: r["test"].split("::")[0])[:top])):
        lines.append(f"by {title}:")
        lines += [f"  {name[:42]:42} {wall:9.1f} {cpu:8.1f} {cpu / total_cpu:6.1%} {n:6d}" for name, wall, cpu, n in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=15, help="how many of the costliest modules to list")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: the README's)")
    args = parser.parse_args(argv)
    pytest_args = args.pytest_args or ["-n", "auto", "--dist", "loadfile", "-q"]
    with tempfile.TemporaryDirectory(prefix="suite-cost-") as folder:
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([sys.executable, "-m", "pytest", *pytest_args, "-p", "benchmarks.suite_cost"],
                              cwd=ROOT, env={**os.environ, OUT_DIR: folder}, stdout=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines_read = [json.loads(line) for path in sorted(Path(folder).glob("*.jsonl"))
                      for line in path.read_text(encoding="utf-8").splitlines()]
    records = [r for r in lines_read if "test" in r]
    failed = sorted({f"{r['failed']} ({r['when']})" for r in lines_read if "failed" in r})
    tree_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cores = os.cpu_count() or 1
    summary = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else ["(pytest printed nothing)"]
    lines = [f"pytest: {summary[0]} (exit {proc.returncode})", *(f"failed: {name}" for name in failed),
             *summarize(records, args.top),
             f"session: {wall:.0f} s wall; the process tree's CPU {tree_cpu:.0f} s on {cores} cores: no schedule runs "
             f"this suite here in under {tree_cpu / cores:.0f} s ({tree_cpu / (wall * cores):.0%} of the cores busy)"]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n", encoding="utf-8")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
