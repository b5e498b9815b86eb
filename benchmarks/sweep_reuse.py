"""What a sweep over a later stage pays for the question stage: the default ArchEHR run as a Hydra multirun (basic
launcher: the jobs run one after another in one process) over `program.alignment.threshold`, with the question
stage's candidates kept in DSPy's cache (the default) against `program.question.cache=false` (every job decodes every
message again), alternating, each in a fresh process and a fresh cache folder.

    python benchmarks/sweep_reuse.py [--rounds 2] [--cases data/archehr/dev_cases.xml] [--limit 10]

Prints each side's median CPU and wall seconds, their ratio, and whether every job's four submissions were the same
on both sides (they must be: a cached message's candidates are the ones a decode gives). Time it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = "0.5,0.7,0.9"


def one(cache: bool, cases: Path, limit: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        args = [sys.executable, str(ROOT / "main.py"), "-m", "program=archehr", f"data.cases={cases}",
                f"data.limit={limit}", f"program.alignment.threshold={THRESHOLDS}", "metrics.bertscore=null",
                "progress=false", f"cache_dir={Path(tmp) / 'cache'}", f"hydra.sweep.dir={out}",
                f"program.question.cache={'true' if cache else 'false'}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            raise SystemExit(f"error: the sweep ({'cache' if cache else 'no cache'}) failed: "
                             f"{proc.stderr.strip().splitlines()[-1:]}")
        subs = {job.name: [(job / f"submission_subtask_{i}.json").read_text() for i in (1, 2, 3, 4)]
                for job in sorted(p for p in out.iterdir() if p.is_dir() and p.name.isdigit())}
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall, "submissions": subs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", type=Path, default=ROOT / "data" / "archehr" / "dev_cases.xml")
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.rounds):
        for cache in (False, True):
            runs[cache].append(one(cache, args.cases, args.limit))
    same = all(r["submissions"] == runs[False][0]["submissions"] for side in runs.values() for r in side)
    jobs = len(runs[True][0]["submissions"])
    result = {"cases": args.limit, "jobs": jobs, "rounds": args.rounds, "submissions_equal": same}
    for cache, name in ((False, "decode_every_job"), (True, "cache")):
        result[name] = {k: round(statistics.median(r[k] for r in runs[cache]), 2) for k in ("cpu_s", "wall_s")}
    result["cpu_ratio"] = round(result["decode_every_job"]["cpu_s"] / result["cache"]["cpu_s"], 2)
    result["wall_ratio"] = round(result["decode_every_job"]["wall_s"] / result["cache"]["wall_s"], 2)
    print(json.dumps(result, indent=1))
    if not same or jobs != len(THRESHOLDS.split(",")):
        raise SystemExit("error: the two sides' submissions differ (or a job is missing)")


if __name__ == "__main__":
    main()
