"""Cases per second of one run's cases: the local executor against `run.executor=ray` with 1 and 2 workers, and what
the Ray path costs per case.

    python benchmarks/ray_throughput.py                      # the non-LLM ArchEHR program, the 34 dev cases
    python benchmarks/ray_throughput.py --lm embedded --cases 4

Each executor runs the same cases through runners/executors (the code `python main.py` runs), timed from the
moment it is asked to run them: `startup` is until its first case finishes (Ray: start a local Ray, start the
workers, each builds the program; every executor's first case loads the embedder), `steady` is cases/s after the
first 2 x workers cases. A Ray worker of 1 CPU runs torch on 1 thread (Ray sets OMP_NUM_THREADS), so the local
executor is timed with torch's default threads and with 1. `overhead per case` is Ray's steady seconds per case with
one worker minus the seconds the worker itself spent in those cases (the records' `seconds`), and, apart, a no-op
actor call's round trip.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import common.instantiate  # noqa: E402,F401 - the resolvers the configs use
from runners.common import configure_dspy  # noqa: E402
from runners.executors.local import LocalExecutor  # noqa: E402
from runners.executors.ray_executor import RayExecutor  # noqa: E402
from runners.program import choose_lm_or_offline, compose_config, contract_for  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_ray_throughput.txt"


def timed(executor: Any, todo: list[Any], run_one: Any, warm: int) -> dict[str, Any]:
    start = time.perf_counter()
    done: list[tuple[float, dict[str, Any]]] = []
    executor.run(todo, run_one, lambda item, record: done.append((time.perf_counter() - start, record)), 1)
    times = [t for t, _ in done]
    steady = [r for _, r in done[warm:]]
    span = times[-1] - times[warm - 1] if len(times) > warm else float("nan")
    return {"cases": len(done), "wall": times[-1], "startup": times[0], "steady_cps": len(steady) / span,
            "steady_s_per_case": span / len(steady), "worker_s_per_case": statistics.mean(r["seconds"] for r in steady)}


def round_trip_ms(calls: int = 200) -> dict[str, float]:
    """A no-op actor method called with one dev case as its argument: sequential, and two in flight."""
    import ray

    from tasks.archehr.data import load_cases

    case = load_cases(ROOT / "data" / "archehr" / "dev_cases.xml")[0]

    class Echo:
        def run(self, item: Any) -> dict[str, Any]:
            return {"case_id": item.case_id}

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        actor = ray.remote(Echo).options(num_cpus=1).remote()
        ray.get(actor.run.remote(case))
        start = time.perf_counter()
        for _ in range(calls):
            ray.get(actor.run.remote(case))
        sequential = (time.perf_counter() - start) / calls
        start = time.perf_counter()
        pending = [actor.run.remote(case), actor.run.remote(case)]
        for _ in range(calls - 2):
            ready, pending = ray.wait(pending, num_returns=1)
            ray.get(ready)
            pending.append(actor.run.remote(case))
        ray.get(pending)
        pipelined = (time.perf_counter() - start) / calls
    finally:
        ray.shutdown()
    return {"sequential": sequential * 1000, "two_in_flight": pipelined * 1000}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=34)
    parser.add_argument("--lm", default="none")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-local", action="store_true")
    args = parser.parse_args()
    overrides = ["program=archehr", f"lm={args.lm}", f"data.cases={ROOT / 'data' / 'archehr' / 'dev_cases.xml'}",
                 f"data.limit={args.cases}", "metrics.bertscore=null", f"cache_dir={ROOT / '.cache' / 'bench_ray'}"]
    if args.lm != "none":
        overrides.append("lm.client.cache=false")  # every call reaches the model
    load = os.getloadavg()
    rows = []
    cfg = compose_config(*overrides)
    contract = contract_for(cfg)
    todo = contract.load(cfg).items
    roles = choose_lm_or_offline(cfg, contract)
    if not args.no_local:
        import torch

        from lms import build_role_lms

        configure_dspy(cfg)
        default_threads = torch.get_num_threads()
        # a Ray worker of 1 CPU runs torch on 1 thread (Ray sets OMP_NUM_THREADS): the local executor with both
        for threads in sorted({default_threads, 1}, reverse=True):
            torch.set_num_threads(threads)
            program = contract.build(cfg, build_role_lms(cfg.lm, roles) if roles else {})  # fresh: no cached embeddings
            rows.append((f"local (this process, torch {threads} thread{'s' * (threads > 1)})",
                         timed(LocalExecutor(), todo, lambda c, p=program: contract.predict(p, c), 2)))
            print(rows[-1], flush=True)
        torch.set_num_threads(default_threads)
    for workers in args.workers:
        ray_cfg = compose_config(*overrides, "run.executor=ray", f"run.ray.num_workers={workers}")
        choose_lm_or_offline(ray_cfg, contract)
        rows.append((f"ray, {workers} worker{'s' * (workers > 1)}", timed(RayExecutor(ray_cfg), todo, None, 2 * workers)))
        print(rows[-1], flush=True)
    trip = round_trip_ms()
    one = next((r for name, r in rows if name == "ray, 1 worker"), None)
    lines = [f"ArchEHR, lm={args.lm}, {len(todo)} dev cases, {os.cpu_count()} CPUs; load average "
             f"{load[0]:.1f} before, {os.getloadavg()[0]:.1f} after (other processes share these CPUs)",
             "(python benchmarks/ray_throughput.py" + (f" --lm {args.lm} --cases {args.cases}" if args.lm != "none" else "")
             + ")", "",
             "| executor | cases | wall s | startup s (to the 1st case) | steady cases/s | steady s/case | "
             "worker s/case |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {r['cases']} | {r['wall']:.1f} | {r['startup']:.1f} | {r['steady_cps']:.2f} | "
              f"{r['steady_s_per_case']:.3f} | {r['worker_s_per_case']:.3f} |" for name, r in rows]
    lines.append("")
    if one:
        lines.append(f"Ray overhead per case (1 worker, steady): {one['steady_s_per_case'] - one['worker_s_per_case']:.4f} s "
                     "(steady s/case minus the worker's own s/case)")
    lines.append(f"no-op actor call with one case as argument: {trip['sequential']:.2f} ms sequential, "
                 f"{trip['two_in_flight']:.2f} ms each with two in flight (as run.executor=ray sends them)")
    text = "\n".join(lines) + "\n"
    print(text)
    out = RESULTS if args.lm == "none" else RESULTS.with_name(f"results_ray_throughput_{args.lm}.txt")
    out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
