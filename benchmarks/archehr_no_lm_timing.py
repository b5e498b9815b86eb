"""Seconds per case of the non-LLM ArchEHR program after the model is loaded, with the embedding cache (each note
sentence embedded once per case, shared by the evidence and alignment stages) against the same program without it
(`cache_size=0`: every stage re-embeds), in the same run.

    python benchmarks/archehr_no_lm_timing.py [--repeats 5] [--long 2000]

Cases: every dev case of 25-35 sentences ("~30-sentence case") and one synthetic note of `--long` sentences built
from the dev notes' sentences (numbered, so no two are identical).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from hydra.utils import instantiate  # noqa: E402

from common.config_groups import compose_config  # noqa: E402
from runners.program import contract_for  # noqa: E402
from tasks.archehr.data import NoteSentence, load_cases  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--long", type=int, default=2000)
    args = parser.parse_args()
    cases = load_cases(DATA / "dev_cases.xml")
    mid = [c for c in cases if 25 <= len(c.sentences) <= 35]
    pool = [s.text for c in cases for s in c.sentences]
    long_note = tuple(NoteSentence(str(i + 1), f"{pool[i % len(pool)]} (entry {i + 1})") for i in range(args.long))
    long_case = replace(cases[0], case_id="long", sentences=long_note, note_excerpt=None)

    cfg = compose_config("program=archehr", "lm=none")
    contract = contract_for(cfg)
    from runners.program import choose_lm_or_no_lm

    choose_lm_or_no_lm(cfg, contract)
    rows = []
    for name, cache_size in (("baseline: no embedding cache (each stage re-embeds)", 0),
                             ("clinprog: one embedding per sentence per case", 20_000)):
        # cache=False: every vector computed in this process (DSPy's cache would hand the repeats their vectors)
        embedder = instantiate(cfg.program.embedder, cache_size=cache_size, cache=False)
        embedder.warm_up()  # load the model outside the timing
        program = contract.build(cfg, None, embedder=embedder)
        per_case = []
        for _ in range(args.repeats):
            for case in mid:
                embedder._cache.clear()  # a new case: nothing of it is cached yet
                start = time.perf_counter()
                program(case=case)
                per_case.append(time.perf_counter() - start)
        embedder._cache.clear()
        start = time.perf_counter()
        program(case=long_case)
        long_seconds = time.perf_counter() - start
        rows.append((name, statistics.median(per_case), statistics.median(len(c.sentences) for c in mid), long_seconds))
    print(f"{len(mid)} dev cases of 25-35 sentences x {args.repeats} repeats; one {args.long}-sentence note; "
          f"model loaded before timing; {os.cpu_count()} CPUs\n")
    print(f"| program | median s per ~30-sentence case | s for the {args.long}-sentence note | sentences/s (long note) |")
    print("|---|---|---|---|")
    for name, median, _, long_s in rows:
        print(f"| {name} | {median:.3f} | {long_s:.2f} | {args.long / long_s:.0f} |")
    base, ours = rows
    print(f"\nspeed-up: {base[1] / ours[1]:.2f}x per ~30-sentence case, {base[3] / ours[3]:.2f}x on the long note")


if __name__ == "__main__":
    main()
