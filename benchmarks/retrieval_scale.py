"""Dense ANN at scale: our local backend's index (FAISS HNSW above the exact threshold) vs ChromaDB, same run.

    python benchmarks/retrieval_scale.py --n 200000            # quick
    python benchmarks/retrieval_scale.py --n 1000000           # the issue's reference size
    python benchmarks/retrieval_scale.py --n 2300000 --no-chroma   # the seed's corpus size

Data: synthetic clustered unit vectors (256-d). Baseline, in the same process: exact inner-product search
(numpy), which also defines recall@50. Reports ingest/build time, RSS growth, p50/p95 single-query latency.
ChromaDB is a benchmark-only extra: pip install -e ".[bench]".
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrieval.local import build_dense_index  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def clustered(n: int, dim: int, clusters: int, rng: np.random.Generator) -> np.ndarray:
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        assign = rng.integers(0, clusters, stop - start)
        out[start:stop] = centers[assign] + 0.35 * rng.standard_normal((stop - start, dim)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, list[float]]:
    ids, times = [], []
    for q in queries:
        start = time.perf_counter()
        scores = data @ q
        top = np.argpartition(-scores, k)[:k]
        ids.append(top[np.argsort(-scores[top])])
        times.append(time.perf_counter() - start)
    return np.array(ids), times


def recall(found: list[list[int]], truth: np.ndarray, k: int) -> float:
    return statistics.mean(len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth, strict=True))


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1e3


def bench_local(data, queries, k, args) -> list[dict]:
    before = rss_mb()
    start = time.perf_counter()
    index, kind = build_dense_index(data, hnsw_threshold=args.hnsw_threshold, hnsw_m=args.m,
                                    ef_construction=args.ef_construction, ef_search=args.ef_search)
    build = time.perf_counter() - start
    rss = rss_mb() - before
    rows = []
    for ef in sorted({args.ef_search, *args.ef_sweep}):
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = ef
        found, times = [], []
        for q in queries:
            t = time.perf_counter()
            _, ids = index.search(q[None, :], k)
            times.append(time.perf_counter() - t)
            found.append([int(i) for i in ids[0]])
        rows.append({"name": f"clinprog local ({kind}, efSearch {ef})", "build_s": build, "rss_mb": rss,
                     "times": times, "found": found})
        if not hasattr(index, "hnsw"):
            break
    return rows


def bench_chroma(data, queries, k):
    import chromadb

    tmp = tempfile.mkdtemp(prefix="chroma_bench_")
    try:
        before = rss_mb()
        client = chromadb.PersistentClient(path=tmp)
        col = client.create_collection("bench", embedding_function=None,
                                       configuration={"hnsw": {"space": "ip"}})
        start = time.perf_counter()
        for s in range(0, len(data), 5000):  # Chroma's max batch is 5461
            col.add(ids=[str(i) for i in range(s, min(len(data), s + 5000))], embeddings=data[s : s + 5000])
        build = time.perf_counter() - start
        found, times = [], []
        for q in queries:
            t = time.perf_counter()
            res = col.query(query_embeddings=[q], n_results=k)
            times.append(time.perf_counter() - t)
            found.append([int(i) for i in res["ids"][0]])
        return {"name": "ChromaDB 1.5.9 (defaults, ip)", "build_s": build, "rss_mb": rss_mb() - before,
                "times": times, "found": found}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=200)
    ap.add_argument("--ef-search", type=int, default=192)
    ap.add_argument("--hnsw-threshold", type=int, default=50_000)
    ap.add_argument("--ef-sweep", type=lambda v: [int(x) for x in v.split(",")], default=[],
                    help="more efSearch values measured on the same HNSW index, e.g. 128,256,384")
    ap.add_argument("--no-chroma", action="store_true")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    data = clustered(args.n, args.dim, max(100, args.n // 1000), rng)
    queries = data[rng.choice(args.n, args.queries, replace=False)] + 0.05 * rng.standard_normal(
        (args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    truth, exact_times = exact_topk(data, queries, args.k)

    rows = [{"name": "baseline: exact numpy f32", "build_s": 0.0, "rss_mb": data.nbytes / 2**20,
             "times": exact_times, "found": [list(t) for t in truth]}]
    rows.extend(bench_local(data, queries, args.k, args))
    gc.collect()
    if not args.no_chroma:
        try:
            rows.append(bench_chroma(data, queries, args.k))
        except ImportError:
            print("chromadb not installed (pip install -e '.[bench]'): skipped")

    base_p50 = pct(rows[0]["times"], 0.5)
    print(f"N={args.n:,} x {args.dim}-d clustered unit vectors, {args.queries} single queries, recall@{args.k} vs exact")
    print("| engine | build/ingest s | RSS growth MB | p50 ms | p95 ms | speedup vs exact (p50) | recall@50 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        p50, p95 = pct(r["times"], 0.5), pct(r["times"], 0.95)
        print(f"| {r['name']} | {r['build_s']:.1f} | {r['rss_mb']:.0f} | {p50:.3f} | {p95:.3f} | "
              f"{base_p50 / p50:.0f}x | {recall(r['found'], truth, args.k):.4f} |")


if __name__ == "__main__":
    main()
