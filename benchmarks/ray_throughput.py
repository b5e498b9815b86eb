"""Cases per second of one run's cases: the local executor against `executor=ray` with 1 and 2 workers, and what
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

from common.config_groups import compose_config  # noqa: E402
from runners.dspy_setup import configure_dspy  # noqa: E402
from runners.executors.local import LocalExecutor  # noqa: E402
from runners.executors.ray_executor import RayExecutor  # noqa: E402
from runners.program import choose_lm_or_no_lm, contract_for  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results_ray_throughput.txt"


def timed(executor: Any, todo: list[Any], run_one: Any, warm: int) -> dict[str, Any]:
    start = time.perf_counter()
    done: list[tuple[float, dict[str, Any]]] = []
    executor.run(todo, run_one, lambda item, record: done.append((time.perf_counter() - start, record)), 1)
    times = [t for t, _ in done]
    steady = [r for _, r in done[warm:]]
    span = times[-1] - times[warm - 1] if len(times) > warm else float("nan")
    return {"cases": len(done), "wall": times[-1], "startup": times[0], "steady_cps": len(steady) / span,
            "steady_s_per_case": span / len(steady), "worker_s_per_case": statistics.mean(r["seconds"] for r in steady),
            "records": [r for _, r in done]}


def per_case_usage(records: list[dict[str, Any]]) -> str:
    """LM calls and tokens per case (the records' usage), for sizing a run against a provider's quota."""
    totals = {"lm_calls": 0, "input_tokens": 0, "output_tokens": 0}
    for record in records:
        for stage in (record.get("usage") or {}).values():
            for k in totals:
                totals[k] += stage.get(k, 0)
    n = max(len(records), 1)
    return ", ".join(f"{k.replace('_', ' ')} {v / n:.1f}" for k, v in totals.items())


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


def request_sizes(cases: int) -> str:
    """What the LM cascade asks of a provider per case, from the requests themselves: the ArchEHR program with
    lm=openai_compatible against a local server that records every request and answers `{}` (each stage then takes
    its fallback, so later prompts carry fallback text, not a model's). Prompt tokens are estimated as lm.rate_limit
    books them (4 characters per token); `max_tokens` is each stage's reply bound, an upper bound on its output."""
    import http.server
    import json
    import threading

    bodies: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self._send({"object": "list", "data": [{"id": "m"}]})

        def do_POST(self) -> None:  # noqa: N802
            bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self._send({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "{}"}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        def _send(self, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from lms import build_role_lms

        cfg = compose_config("program=archehr", "lm=openai_compatible", "lm.client.model=m", "lm.client.cache=false",
                             f"lm.client.api_base=http://127.0.0.1:{server.server_address[1]}/v1",
                             "lm.client.num_retries=0", f"data.cases={ROOT / 'data' / 'archehr' / 'dev_cases.xml'}",
                             f"data.limit={cases}", "metrics.bertscore=null", f"cache_dir={ROOT / '.cache' / 'bench_ray'}")
        contract = contract_for(cfg)
        todo = contract.load(cfg).items
        roles = choose_lm_or_no_lm(cfg, contract)
        configure_dspy(cfg)
        program = contract.build(cfg, build_role_lms(cfg.lm, roles))
        for case in todo:
            contract.predict(program, case)
    finally:
        server.shutdown()
    prompt = sum(len(json.dumps(b.get("messages"), ensure_ascii=False)) // 4 for b in bodies) / len(todo)
    reply = sum(int(b.get("max_tokens") or 0) for b in bodies) / len(todo)
    return (f"requests per case {len(bodies) / len(todo):.2f}, prompt tokens per case ~{prompt:.0f} (4 characters per "
            f"token), reply bound per case {reply:.0f} tokens ({len(todo)} dev cases, lm=openai_compatible, a server "
            "answering {} so every stage took its fallback)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=34)
    parser.add_argument("--lm", default="none")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-local", action="store_true")
    parser.add_argument("--request-sizes", action="store_true", help="only what the LM cascade asks per case")
    args = parser.parse_args()
    if args.request_sizes:
        line = request_sizes(args.cases)
        print(line)
        RESULTS.with_name("results_archehr_request_sizes.txt").write_text(
            f"{line}\n(python benchmarks/ray_throughput.py --request-sizes)\n", encoding="utf-8")
        return
    overrides = ["program=archehr", f"lm={args.lm}", f"data.cases={ROOT / 'data' / 'archehr' / 'dev_cases.xml'}",
                 f"data.limit={args.cases}", "metrics.bertscore=null", f"cache_dir={ROOT / '.cache' / 'bench_ray'}"]
    if args.lm != "none":
        overrides.append("lm.client.cache=false")  # every call reaches the model
    load = os.getloadavg()
    rows = []
    cfg = compose_config(*overrides)
    contract = contract_for(cfg)
    todo = contract.load(cfg).items
    roles = choose_lm_or_no_lm(cfg, contract)
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
            print(rows[-1][0], {k: v for k, v in rows[-1][1].items() if k != "records"}, flush=True)
        torch.set_num_threads(default_threads)
    for workers in args.workers:
        ray_cfg = compose_config(*overrides, "executor=ray", f"executor.num_workers={workers}")
        choose_lm_or_no_lm(ray_cfg, contract)
        rows.append((f"ray, {workers} worker{'s' * (workers > 1)}", timed(RayExecutor(ray_cfg), todo, None, 2 * workers)))
        print(rows[-1][0], {k: v for k, v in rows[-1][1].items() if k != "records"}, flush=True)
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
    if args.lm != "none":
        lines.append(f"per case, over {rows[0][1]['cases']} cases ({rows[0][0]}): {per_case_usage(rows[0][1]['records'])}")
    lines.append(f"no-op actor call with one case as argument: {trip['sequential']:.2f} ms sequential, "
                 f"{trip['two_in_flight']:.2f} ms each with two in flight (as executor=ray sends them)")
    text = "\n".join(lines) + "\n"
    print(text)
    out = RESULTS if args.lm == "none" else RESULTS.with_name(f"results_ray_throughput_{args.lm}.txt")
    out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
