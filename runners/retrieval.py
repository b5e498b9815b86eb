"""`task=index` (build or extend an index from `corpus=...`) and `task=search` (query it)."""

from __future__ import annotations

import time
from dataclasses import asdict

from omegaconf import DictConfig, OmegaConf

from common.outputs import output_dir, write_json
from retrieval.corpus import CorpusSpec
from retrieval.factory import build_backend, build_embedder, build_retriever
from retrieval.ingest import ingest
from retrieval.passage import RetrievalError
from retrieval.repair_command import ROOT, reindex_overrides


def reindex_command(cfg: DictConfig) -> list[str]:
    """The overrides that index this corpus again as now: the corpus option chosen, the corpus fields that differ
    from it (a `corpus.name=` corpus is only reproduced by these), the embedder and data paths (recorded in the
    manifest for repair hints)."""
    from hydra.core.hydra_config import HydraConfig

    spec = OmegaConf.to_container(cfg.corpus, resolve=True)
    choices = HydraConfig.get().runtime.choices if HydraConfig.initialized() else {}
    choice, base = choices.get("corpus"), None
    option = ROOT / "conf" / "corpus" / f"{choice}.yaml"
    if choice and option.exists():
        # compared unresolved (the option's interpolations resolve only inside the whole config): an unchanged
        # field is left to the option; a changed one is written out resolved
        raw = OmegaConf.to_container(cfg.corpus, resolve=False)
        option_raw = OmegaConf.to_container(OmegaConf.load(option), resolve=False)
        base = {k: spec[k] if raw.get(k) == v else v for k, v in option_raw.items() if k in spec}
    extra = []
    if choices.get("embedder") and choices["embedder"] != "minilm":
        extra.append(f"embedder={choices['embedder']}")
    overrides = HydraConfig.get().overrides.task if HydraConfig.initialized() else []
    # typed overrides of the embedder (its choice is added above) and of `paths` (where corpus paths point)
    extra += [o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] in ("embedder", "paths")
              and not o.startswith("embedder=")]
    return reindex_overrides(spec, choice if base is not None else None, base, extra)


def index(cfg: DictConfig) -> None:
    spec = CorpusSpec(**OmegaConf.to_container(cfg.corpus, resolve=True))
    embedder = build_embedder(cfg)
    backend = build_backend(cfg, embedder)
    report = ingest(spec, backend, embedder, progress=cfg.progress, reindex=reindex_command(cfg))
    write_json(output_dir() / "index_report.json", asdict(report))
    replaced = (f" ({report.changed_docs} changed and {report.removed_docs} removed documents: "
                f"{report.removed_chunks} old chunks removed)" if report.changed_docs or report.removed_docs else "")
    print(f"index {spec.name}: {report.chunks} chunks, {report.added} added{replaced}, {report.skipped} already "
          f"indexed, {report.failed} failed, {report.seconds:.1f} s" + (f"; {report.finalize}" if report.finalize else "")
          + (f"; {report.duplicates_skipped} duplicate doc ids skipped" if report.duplicates_skipped else ""))
    for note in report.repaired or []:
        print(f"repaired: {note}")


def search(cfg: DictConfig) -> None:
    if not cfg.get("query"):
        raise RetrievalError("task=search needs query='...'")
    start = time.perf_counter()
    retriever = build_retriever(cfg)
    # Start-up (model loading, index files, bm25s' JIT compile or numba-cache load) happens once per process: a
    # throwaway query pays it here so that the query time below is what each further query costs.
    parts = retriever.warm_up()
    load_s = time.perf_counter() - start
    passages = retriever.search(cfg.query)
    for i, p in enumerate(passages, 1):
        print(f"{i:2d}. {p.score:.4f} [{p.source}] {p.id} | {p.title}\n    {p.text[:160]!r}")
    timing = {"load_s": load_s, **parts, "query_s": sum(retriever.last_timing.values()), **retriever.last_timing}
    write_json(output_dir() / "timing.json", timing)
    print(f"timing: {format_timing(timing)}")


def format_timing(t: dict[str, float]) -> str:
    """`load 9.3 s (embedder 4.2 s, index 5.1 s; with a warm-up query), query 0.02 s (search 0.02 s, rerank 0.00 s)`."""
    load = ", ".join(f"{name} {t[f'{name}_s']:.1f} s" for name in ("embedder", "index", "reranker") if f"{name}_s" in t)
    return (f"load {t['load_s']:.1f} s ({load}; with a warm-up query), "
            f"query {t['query_s']:.2f} s (search {t['search_s']:.2f} s, rerank {t['rerank_s']:.2f} s)")
