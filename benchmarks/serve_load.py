"""Bounded load test of `task=serve` (no-LM ArchEHR program): N requests, C at a time, from the dev cases.

    python benchmarks/serve_load.py [--requests 500] [--concurrency 8]

Starts the server as a user would (`python main.py task=serve ...` on 127.0.0.1), waits for /health, then sends the
requests with httpx from a thread pool and prints latency percentiles, throughput and the error count."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lms.local_server import free_port  # noqa: E402
from tasks.archehr.data import load_cases  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-concurrency", type=int, default=2, help="serve.max_concurrency")
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "task=serve", f"serve.port={port}",
                               f"serve.max_concurrency={args.max_concurrency}", "serve.max_queue=64",
                               "hydra.run.dir=/tmp/clinprog_serve_load"], cwd=ROOT,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        cases = load_cases(ROOT / "data" / "archehr" / "dev_cases.xml")
        bodies = [{"case_id": c.case_id, "patient_narrative": c.patient_narrative,
                   "patient_question": list(c.patient_question_phrases),
                   "sentences": [{"id": s.id, "text": s.text} for s in c.sentences]} for c in cases]
        client = httpx.Client(timeout=120)

        def one(i: int) -> tuple[float, int]:
            start = time.perf_counter()
            r = client.post(f"{url}/v1/archehr/answer", json=bodies[i % len(bodies)])
            return time.perf_counter() - start, r.status_code

        start = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(one, range(args.requests)))
        wall = time.perf_counter() - start
    finally:
        server.kill()
    latencies = sorted(t for t, _ in results)
    errors = sum(1 for _, status in results if status != 200)
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    print(f"{args.requests} requests, {args.concurrency} concurrent, serve.max_concurrency={args.max_concurrency}, "
          f"no-LM ArchEHR program, dev cases ({statistics.mean(len(b['sentences']) for b in bodies):.0f} "
          f"sentences on average), {os.cpu_count()} CPUs\n")
    print("| p50 ms | p95 ms | p99 ms | throughput req/s | errors |")
    print("|---|---|---|---|---|")
    print(f"| {p(0.5):.0f} | {p(0.95):.0f} | {p(0.99):.0f} | {args.requests / wall:.1f} | {errors} |")


if __name__ == "__main__":
    main()
