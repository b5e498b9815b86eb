"""The default ArchEHR run on a machine shared with other CPU-bound work: seconds for the same cases alone and beside
`--busy` single-threaded busy loops, in one process and one run, for each thread setting (common/cpu.py).

    python benchmarks/busy_machine.py [--cases 10] [--busy 2] [--out benchmarks/results_busy_machine.txt]

The program is built and its models loaded before timing; each pass starts with an empty embedding cache (each
case embedded as a new case is). Rows: the default (`threads: auto` for llama.cpp and torch), the same with greedy
decoding (`program.question.samples=0`), and fixed thread counts (2: the default before, 1). Conditions alternate
per row (alone, busy, alone, busy) so drift of the machine falls on both. Measure with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra.utils import instantiate  # noqa: E402

from common.config_groups import compose_config  # noqa: E402
from runners.program import contract_for  # noqa: E402
from tasks.archehr.data import load_cases  # noqa: E402

CASES = Path(__file__).resolve().parents[1] / "data" / "archehr" / "realistic_cases_b.xml"
ROWS = {"default (threads auto)": ("auto", ()),
        "greedy, threads auto (program.question.samples=0)": ("auto", ("program.question.samples=0",)),
        "threads 2 (the default before)": (2, ("program.question.threads=2",)),
        "threads 1": (1, ("program.question.threads=1",))}
STAGES = ("question", "evidence", "answer", "alignment")


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def timed_pass(program, embedder, cases) -> tuple[float, dict[str, float]]:
    embedder._cache.clear()
    stages = dict.fromkeys(STAGES, 0.0)
    start = time.perf_counter()
    for case in cases:
        pred = program(case=case)
        for stage in STAGES:
            stages[stage] += pred.usage.get(stage, {}).get("seconds", 0.0)
    return time.perf_counter() - start, stages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cases = load_cases(CASES)[: args.cases]
    lines = [f"{len(cases)} cases of {CASES.name}; alone vs beside {args.busy} single-threaded busy loops; "
             f"{os.cpu_count()} CPUs; models loaded before timing; median of {args.repeats} passes per condition\n",
             "| setting | alone s | busy s | busy / alone | question alone / busy s | evidence | alignment |",
             "|---|---|---|---|---|---|---|"]
    for name, (torch_setting, overrides) in ROWS.items():
        cfg = compose_config("program=archehr", "lm=none", *overrides)
        embedder = instantiate(cfg.program.embedder, threads=torch_setting, cache=False)  # every pass embeds
        program = contract_for(cfg).build(cfg, None, embedder=embedder)
        program(case=cases[0])  # load every model
        results: dict[bool, list] = {False: [], True: []}
        for _ in range(args.repeats):
            for busy in (False, True):
                loops = busy_loops(args.busy) if busy else []
                try:
                    time.sleep(0.5 if busy else 0)
                    results[busy].append(timed_pass(program, embedder, cases))
                finally:
                    for loop in loops:
                        loop.kill()
                        loop.wait()
        med = {b: statistics.median(r[0] for r in results[b]) for b in results}
        stage = {b: {s: statistics.median(r[1][s] for r in results[b]) for s in STAGES} for b in results}
        cells = [f"{stage[False][s]:.2f} / {stage[True][s]:.2f} ({stage[True][s] / max(stage[False][s], 1e-9):.2f}x)"
                 for s in ("question", "evidence", "alignment")]
        lines.append(f"| {name} | {med[False]:.1f} | {med[True]:.1f} | **{med[True] / med[False]:.2f}x** | "
                     + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
