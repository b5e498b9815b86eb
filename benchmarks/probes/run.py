"""`python benchmarks/probe.py`: every probe (or `--only` some), the command-line ones in a pool beside the serving
ones, then the summary; exit 0 only if every probe is ok."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import benchmarks.probes as package
from benchmarks.probes.cli import cli_probes
from benchmarks.probes.harness import Files, Report
from benchmarks.probes.serving import serve_probes


def main() -> int:
    parser = argparse.ArgumentParser(description=(package.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="command-line probes at a time (besides the server)")
    parser.add_argument("--only", default=None, help="only the probes whose item and description contain one of "
                                                      "these (comma-separated)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    parser.add_argument("--times", action="store_true", help="then the seconds of the slowest probes")
    args = parser.parse_args()
    wanted = [w for w in (args.only or "").split(",") if w]

    def only(item: str, what: str) -> bool:
        return not wanted or any(w in f"{item} {what}" for w in wanted)

    tmp = Path(tempfile.mkdtemp(prefix="clinprog-probe-"))
    report = Report()
    start = time.monotonic()
    try:
        jobs = cli_probes(report, Files(tmp), only)
        with ThreadPoolExecutor(args.jobs + 1) as pool:
            serving = pool.submit(serve_probes, report, tmp, only)
            for future in [pool.submit(j) for j in jobs]:
                future.result()
            serving.result()
    finally:
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

