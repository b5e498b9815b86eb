"""Start-up of `python main.py task=search` on a small index: bm25s' numba kernels compiled in every process
(baseline, `retriever.backend.numba_cache=false`) against compiled once and loaded from numba's on-disk cache
(clinprog's default), in the same run. Each setting runs a first process (empty cache folder) then a second one.

    python benchmarks/retrieval_startup.py [--docs 200] [--repeats 3]

Numbers come from each run's timing.json: `load` is everything before the query (embedder model, index files,
bm25s' JIT compile or cache load, through one throwaway warm-up query); `index` is its index part; `query` is the
user's query after that warm-up. Medians over `--repeats`, each repeat with a fresh, empty cache folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clinprog_cli import run_main  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

QUERY = "how is acute lymphoblastic leukemia treated in adults"
SETTINGS = (("baseline: numba compiles in every process", "false"), ("clinprog: numba cache on disk", "true"))


def small_corpus(folder: Path, docs: int) -> list[str]:
    """The first `docs` MedQuAD answers as a corpus and the overrides that index it."""
    path = folder / "medquad_small.jsonl"
    with gzip.open(ROOT / "data" / "corpora" / "medquad" / "medquad.jsonl.gz", "rt", encoding="utf-8") as src, \
            path.open("w", encoding="utf-8") as out:
        for _, line in zip(range(docs), src, strict=False):
            out.write(line)
    return ["corpus.name=medquad_small", f"corpus.paths=[{path}]"]


def search(index_dir: Path, numba_cache: str) -> dict[str, float]:
    out = run_main("task=search", f"index_dir={index_dir}", f"query='{QUERY}'",
                   f"+retriever.backend.numba_cache={numba_cache}", prefix="clinprog_startup_")
    try:
        return json.loads((out / "timing.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="clinprog_startup_"))
    try:
        index_dir = work / "index"
        built = run_main("task=index", f"index_dir={index_dir}", *small_corpus(work, args.docs), prefix="clinprog_startup_")
        chunks = json.loads((built / "index_report.json").read_text())["chunks"]
        shutil.rmtree(built, ignore_errors=True)
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        for repeat in range(args.repeats):
            for name, flag in SETTINGS:
                os.environ["NUMBA_CACHE_DIR"] = str(work / f"numba_{flag}_{repeat}")  # empty: a first process
                for process in (1, 2):
                    runs.setdefault((name, process), []).append(search(index_dir, flag))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(name: str, process: int, key: str) -> float:
        return statistics.median(t[key] for t in runs[(name, process)])

    print(f"{args.docs} MedQuAD documents ({chunks} chunks), all-MiniLM-L6-v2 embedder, hybrid (FAISS exact + bm25s "
          f"numba); medians of {args.repeats} repeats; {os.cpu_count()} CPUs\n")
    print("| setting | process | load s | embedder s | index s (open + warm-up query) | query s |")
    print("|---|---|---|---|---|---|")
    for name, _ in SETTINGS:
        for process in (1, 2):
            print(f"| {name} | {'first (empty cache)' if process == 1 else 'second'} | {med(name, process, 'load_s'):.2f} "
                  f"| {med(name, process, 'embedder_s'):.2f} | {med(name, process, 'index_s'):.2f} "
                  f"| {med(name, process, 'query_s'):.3f} |")
    (base, _), (ours, _) = SETTINGS
    print(f"\nsecond process, cache on vs off: index part {med(base, 2, 'index_s') / med(ours, 2, 'index_s'):.1f}x "
          f"faster, whole load {med(base, 2, 'load_s') / med(ours, 2, 'load_s'):.2f}x faster")


if __name__ == "__main__":
    main()
