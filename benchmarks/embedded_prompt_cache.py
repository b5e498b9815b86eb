"""The embedded LM with and without a RAM cache of KV states (`lm.client.prompt_cache_mb`), same run otherwise.

    python benchmarks/embedded_prompt_cache.py [--notes 4] [--only archehr|mediqa_corr]

ArchEHR: the 3 bundled cases; MEDIQA-CORR: the first validation notes (--notes) at the defaults (N=4 steps,
M=5 episodes), search off (no index needed). DSPy's cache is off, so every request reaches the model. llama.cpp already reuses the
KV state of the previous prompt's shared prefix (MedEval's five reviews differ only in the last field, the
criterion); the RAM cache adds earlier prompts' prefixes.
"""

from __future__ import annotations

import argparse
import json

from clinprog_cli import run_main  # benchmarks/ is on sys.path when run as a script


def run(*overrides: str) -> dict:
    out = run_main("lm=embedded", "lm.client.cache=false", "metrics.bertscore=null", *overrides, prefix="clinprog_kv_")
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    n = len(records)
    tokens = sum(u.get("input_tokens", 0) for r in records for u in r["usage"].values()) / n
    calls = sum(u.get("lm_calls", 0) for r in records for u in r["usage"].values()) / n
    return {"seconds": sum(r["seconds"] for r in records) / n, "calls": calls, "prompt_tokens": tokens, "n": n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=4)
    parser.add_argument("--only", choices=["archehr", "mediqa_corr"], default=None)
    args = parser.parse_args()
    rows = []
    for mb in (0, 512):
        if args.only in (None, "archehr"):
            rows.append(("archehr (per case)", mb, run("program=archehr", f"lm.client.prompt_cache_mb={mb}")))
        if args.only in (None, "mediqa_corr"):
            rows.append(("mediqa_corr (per note)", mb, run("program=mediqa_corr", "program.search.enabled=false",
                                                           f"data.limit={args.notes}",
                                                           f"lm.client.prompt_cache_mb={mb}")))
    print("embedded SmolLM2-135M, DSPy cache off, 2 CPUs\n")
    print("| program | prompt_cache_mb | seconds | LM calls | prompt tokens |")
    print("|---|---|---|---|---|")
    for name, mb, r in sorted(rows, key=lambda x: (x[0], x[1])):
        print(f"| {name} | {mb} | {r['seconds']:.1f} | {r['calls']:.1f} | {r['prompt_tokens']:.0f} |")


if __name__ == "__main__":
    main()
