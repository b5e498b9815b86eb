"""bm25s' numba kernels are compiled by the first process only: later processes load them from the cache folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.corpus import CorpusSpec
from retrieval.ingest import ingest
from retrieval.local import ROOT, LocalIndex, numba_cache_dir
from tests.retrieval_helpers import HashEmbedder

pytestmark = pytest.mark.integration

# Opens a tiny index with the numba BM25 backend, runs one query, and reports numba's cache statistics for the
# kernel bm25s retrieves with.
SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from retrieval.local import LocalIndex
from tests.retrieval_helpers import HashEmbedder

index = LocalIndex({index!r}, HashEmbedder(), bm25_backend="numba")
hits = index.search("isoniazid rifampin tuberculosis", 3)
from bm25s.numba.retrieve_utils import _retrieve_internal_jitted_serial as kernel
stats = kernel.stats
print(json.dumps({{"top": hits[0].id, "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                  "cache_path": stats.cache_path}}))
"""


def run(tmp_path: Path, cache: Path) -> dict:
    code = SCRIPT.format(root=str(ROOT), index=str(tmp_path / "idx"))
    env = {k: v for k, v in os.environ.items() if k != "CLINPROG_CACHE_DIR"} | {"NUMBA_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_loads_the_compiled_kernel(tmp_path):
    # Built here with the numpy backend: the processes below search an index opened from disk (memory-mapped,
    # read-only arrays: the signature a search process compiles), and nothing is compiled in this one.
    spec = CorpusSpec(name="tiny", paths=[str(ROOT / "tests" / "fixtures" / "corpus" / "tiny.jsonl")],
                      text_field="body", title_fields=["topic"], source_field="src")
    index = LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy")
    ingest(spec, index, index.embedder, progress=False)
    cache = tmp_path / "numba"
    first = run(tmp_path, cache)
    assert first["top"] == "tiny:d5#0"
    assert (first["hits"], first["misses"]) == (0, 1)  # compiled here, then written to the cache
    assert Path(first["cache_path"]).is_relative_to(cache) and any(cache.rglob("*.nbi"))
    second = run(tmp_path, cache)
    assert second["top"] == "tiny:d5#0"
    assert (second["hits"], second["misses"]) == (1, 0)  # loaded, not compiled


@pytest.mark.parametrize(("env", "expected"), [
    ({"NUMBA_CACHE_DIR": "/x/numba", "CLINPROG_CACHE_DIR": "/y"}, Path("/x/numba")),
    ({"CLINPROG_CACHE_DIR": "/y"}, Path("/y/numba")),
    ({}, ROOT / ".cache" / "numba"),
])
def test_cache_folder_precedence(monkeypatch, env, expected):
    for name in ("NUMBA_CACHE_DIR", "CLINPROG_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert numba_cache_dir() == expected
