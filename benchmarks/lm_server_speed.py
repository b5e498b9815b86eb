"""Seconds per ArchEHR case through a real OpenAI-compatible server (llama_cpp.server, packaged SmolLM2) against the
in-process embedded engine (same GGUF), and lm.num_threads=4 against 1 on that server. DSPy's cache is off.

    python benchmarks/lm_server_speed.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clinprog_cli import run_main  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

from lms.local_server import MODEL_ALIAS, LlamaServer  # noqa: E402


def run(*overrides: str) -> dict:
    out = run_main("program=archehr", "lm.client.cache=false", "metrics.bertscore=null", *overrides,
                   prefix="clinprog_speed_")
    usage = json.loads((out / "usage.json").read_text())
    wall = sum(r["seconds"] for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines()))
    return {"per_case": usage["seconds_per_case"], "cases": usage["cases"], "sum": wall,
            "parse": usage["parse_success_rate"]}


def main() -> None:
    import time

    rows = []
    embedded = run("lm=embedded")
    rows.append(("embedded engine (in-process), lm.num_threads=1", embedded, None))
    server = LlamaServer().start()
    try:
        lm = ("lm=openai_compatible", f"lm.client.api_base={server.api_base}", f"lm.client.model={MODEL_ALIAS}")
        for threads in (1, 4):
            start = time.perf_counter()
            result = run(*lm, f"lm.num_threads={threads}")
            rows.append((f"llama_cpp.server, lm.num_threads={threads}", result, time.perf_counter() - start))
    finally:
        server.stop()
    print("3 bundled cases, 4 LM calls per case, cache off, 2 CPUs (n_threads=2 in both engines)\n")
    print("| engine | s per case | wall s for 3 cases (run) | parse success |")
    print("|---|---|---|---|")
    for name, r, wall in rows:
        print(f"| {name} | {r['per_case']:.1f} | {wall:.1f} | {min(r['parse'].values()):.2f} |"
              if wall else f"| {name} | {r['per_case']:.1f} | - | {min(r['parse'].values()):.2f} |")
    one, four = rows[1][2], rows[2][2]
    print(f"\nspeed-up of lm.num_threads=4 over 1 on one llama_cpp.server: {one / four:.2f}x "
          "(its single model slot serialises requests)")


if __name__ == "__main__":
    main()
