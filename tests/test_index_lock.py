"""Two `task=index` writers into one index folder at once, as two real processes: the second waits for the first (or
refuses in one line naming it), and the manifest keeps both corpora (issue #21, Index)."""

import json
import os
import subprocess
import sys
import time

import pytest

from retrieval.index_lock import LOCK_FILE, holder
from retrieval.local import LocalIndex
from tests.conftest import ROOT
from tests.retrieval_helpers import HashEmbedder

pytestmark = pytest.mark.integration

# One writer: ingests `n` documents named <corpus>, embedding slowly (so the two runs overlap for sure).
WRITER = """
import json, sys, time
from pathlib import Path
from retrieval.corpus import CorpusSpec
from retrieval.ingest import ingest
from retrieval.local import LocalIndex
from retrieval.passage import RetrievalError
from tests.retrieval_helpers import HashEmbedder

class SlowEmbedder(HashEmbedder):
    def encode_documents(self, texts, show_progress=False):
        time.sleep(float(sys.argv[4]))
        return super().encode_documents(texts)

index_dir, name, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
path = Path(index_dir).parent / f"{name}.jsonl"
path.write_text("".join(json.dumps({"id": f"{name}{i}", "body": f"{name} document {i} about anemia"}) + "\\n"
                        for i in range(12)))
spec = CorpusSpec(name=name, paths=[str(path)], text_field="body")
embedder = SlowEmbedder()
try:
    report = ingest(spec, LocalIndex(index_dir, embedder, bm25_backend="numpy", lock_timeout_s=timeout), embedder,
                    batch_size=3, progress=False)
except RetrievalError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
print(f"added {report.added}")
"""


def start(tmp_path, name, timeout=60.0, delay=0.0):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "idx"), name, str(timeout), str(delay)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_for_holder(tmp_path, proc):
    """Until `proc` holds the index lock (its pid is in the lock file and the lock is taken)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        info = holder(tmp_path / "idx")
        if info and info.get("pid") == proc.pid:
            return info
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the first writer never took the lock")


def test_a_second_writer_waits_and_the_manifest_keeps_both_corpora(tmp_path):
    first = start(tmp_path, "alpha", delay=0.4)  # 4 batches x 0.4 s
    wait_for_holder(tmp_path, first)
    second = start(tmp_path, "beta")
    out1, err1 = first.communicate(timeout=300)
    out2, err2 = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (err1[-800:], err2[-800:])
    assert "added 12" in out1 and "added 12" in out2
    assert f"is being written by another task=index (pid {first.pid}, started " in err2
    assert "waiting up to 60 s" in err2
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert set(manifest["corpora"]) == {"alpha", "beta"} and manifest["count"] == 24
    index = LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy")
    assert index.consistent() == [] and index.count() == 24
    assert {p.metadata["doc_id"][:4] for p in index.search("anemia document", 24)} == {"alph", "beta"}
    assert holder(tmp_path / "idx") is None  # released when the writers ended


def test_a_second_writer_past_its_timeout_refuses_in_one_line_naming_the_first(tmp_path):
    first = start(tmp_path, "alpha", delay=1.0)
    info = wait_for_holder(tmp_path, first)
    second = start(tmp_path, "beta", timeout=0.5)
    out2, err2 = second.communicate(timeout=300)
    first.communicate(timeout=300)
    assert second.returncode == 2
    errors = [line for line in err2.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err2
    assert f"pid {first.pid}, started {info['started']}" in errors[0] and "run this again when it has finished" \
        in errors[0]
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert set(manifest["corpora"]) == {"alpha"}


def test_a_search_during_an_ingest_says_it_is_being_updated(tmp_path):
    import pytest

    from retrieval.passage import RetrievalError

    first = start(tmp_path, "alpha", delay=0.5)
    wait_for_holder(tmp_path, first)
    while not (tmp_path / "idx" / "store.sqlite").exists() or \
            LocalIndex(tmp_path / "idx", HashEmbedder()).count() == 0:  # rows committed, derived files not yet built
        time.sleep(0.05)
    with pytest.raises(RetrievalError, match=rf"is being updated by task=index \(pid {first.pid}"):
        LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy").search("anemia", 3)
    first.communicate(timeout=300)
    assert LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy").search("anemia", 3)
    assert (tmp_path / "idx" / LOCK_FILE).exists()
