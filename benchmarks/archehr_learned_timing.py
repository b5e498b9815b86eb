"""Seconds per ~30-sentence case of the default (non-LLM) ArchEHR program with its learned evidence and alignment
stages, against the same program with the similarity stages they replaced, in the same run, after start-up.

    python benchmarks/archehr_learned_timing.py [--repeats 5]

Cases: every dev and realistic case of 25-35 sentences. Each case starts with an empty embedding cache (nothing of
it is embedded yet), as a new case does; the model is loaded before timing. The learned stages embed more texts
per case (the question, the narrative and its sentences, the answer's clauses) and compute their features.
"""

from __future__ import annotations

import argparse
import os
import statistics
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

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"
PROGRAMS = {"default run: evidence=learned, alignment=learned": (),
            "before #20: evidence=embedding, alignment=similarity": ("program/archehr/evidence=embedding",
                                                                     "program/archehr/alignment=similarity")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cases = [c for name in ("dev_cases", "realistic_cases_a", "realistic_cases_b")
             for c in load_cases(DATA / f"{name}.xml") if 25 <= len(c.sentences) <= 35]
    # cache=False: each case embeds its sentences (DSPy's cache would hand the repeats their vectors)
    embedder = instantiate(compose_config("program=archehr").program.embedder, cache=False)
    embedder.warm_up()  # load the model outside the timing
    rows = []
    for name, overrides in PROGRAMS.items():
        cfg = compose_config("program=archehr", "lm=none", *overrides)
        program = contract_for(cfg).build(cfg, None, embedder=embedder)
        per_case, cpu, stages = [], [], {}
        for _ in range(args.repeats):
            for case in cases:
                embedder._cache.clear()  # a new case: nothing of it is embedded yet
                start, start_cpu = time.perf_counter(), time.process_time()
                pred = program(case=case)
                per_case.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                for stage, usage in pred.usage.items():
                    stages.setdefault(stage, []).append(usage["seconds"])
        rows.append((name, statistics.median(per_case), statistics.median(cpu), max(per_case),
                     {s: statistics.median(v) for s, v in stages.items()}))
    sentences = statistics.median(len(c.sentences) for c in cases)
    print(f"{len(cases)} cases of 25-35 sentences (median {sentences:.0f}) x {args.repeats} repeats; model loaded "
          f"before timing; embedding cache emptied before each case; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f} at the end\n")
    print("| program | median s per case | median CPU s per case | slowest case s | median s per stage |")
    print("|---|---|---|---|---|")
    for name, median, cpu_median, slowest, stages in rows:
        per_stage = ", ".join(f"{s} {v:.3f}" for s, v in stages.items())
        print(f"| {name} | {median:.3f} | {cpu_median:.3f} | {slowest:.3f} | {per_stage} |")
    (_, new, new_cpu, *_), (_, old, old_cpu, *_) = rows
    print(f"\nlearned / similarity stages: {new / old:.2f}x wall time, {new_cpu / old_cpu:.2f}x CPU time per case "
          f"(CPU time counts this process's work whatever else the machine runs)")


if __name__ == "__main__":
    main()
