"""Re-indexing a changed corpus under the same name: changed documents are re-embedded and their old chunks removed,
removed documents leave the index, and no search ever serves the old text (issue #21, Index)."""

import json
import shutil
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest

from retrieval.corpus import CorpusSpec
from retrieval.ingest import ingest
from retrieval.local import LocalIndex
from retrieval.passage import RetrievalError
from tests.retrieval_helpers import HashEmbedder, index_at
from tests.test_retrieval import FIXTURES, TINY

pytestmark = pytest.mark.unit


def corpus_copy(tmp_path, name="edited.jsonl", keep=None, edit=None):
    """TINY's records, optionally only the ids in `keep`, with `edit(record)` applied; same corpus name "tiny"."""
    records = [json.loads(line) for line in (FIXTURES / "tiny.jsonl").read_text().splitlines()]
    records = [edit(dict(r)) if edit else r for r in records if keep is None or r["id"] in keep]
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return CorpusSpec(**{**TINY.__dict__, "paths": [str(path)]})


def revised(record):
    record["body"] = f"REVISED {record['id']}: gout is treated with colchicine and allopurinol."
    return record


def stored_texts(index):
    return {cid: text for cid, text in index._conn().execute("SELECT id, text FROM chunks")}


def test_every_document_changed_is_re_embedded_and_the_old_text_is_gone(tmp_path):
    index = index_at(tmp_path / "idx")
    ingest(TINY, index, index.embedder, batch_size=4, progress=False)
    assert index.search("isoniazid rifampin tuberculosis", 1)[0].id == "tiny:d5#0"
    report = ingest(corpus_copy(tmp_path, edit=revised), index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4,
                    progress=False)
    # before: "0 added, 6 already indexed" and search served the old text
    assert (report.changed_docs, report.removed_docs, report.removed_chunks, report.added) == (6, 0, 6, 6)
    fresh = index_at(tmp_path / "idx")
    assert fresh.consistent() == [] and fresh.count() == 6
    assert all(text.startswith("REVISED") for text in stored_texts(fresh).values())
    for mode in ("hybrid", "dense", "bm25"):
        fresh.mode = mode
        hits = fresh.search("isoniazid rifampin tuberculosis gout colchicine", 6)
        assert hits and all(p.text.startswith("REVISED") for p in hits), mode
    again = ingest(corpus_copy(tmp_path, edit=revised), index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    assert (again.changed_docs, again.added, again.skipped, again.finalize) == (0, 0, 6, None)


def test_one_changed_and_two_removed_documents(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)

    def edit_d3(record):
        return revised(record) if record["id"] == "d3" else record

    spec = corpus_copy(tmp_path, keep={"d1", "d2", "d3", "d4"}, edit=edit_d3)
    report = ingest(spec, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    assert (report.changed_docs, report.removed_docs, report.added, report.skipped) == (1, 2, 1, 3)
    index = index_at(tmp_path / "idx")
    assert index.consistent() == [] and index.count() == 4
    assert set(stored_texts(index)) == {"tiny:d1#0", "tiny:d2#0", "tiny:d3#0", "tiny:d4#0"}
    assert stored_texts(index)["tiny:d3#0"].startswith("REVISED")
    assert all(p.id not in ("tiny:d5#0", "tiny:d6#0") for p in index.search("isoniazid tuberculosis troponin", 4))
    assert all("Metformin" not in p.text for p in index.search("metformin diabetes", 4))


def test_another_corpus_sharing_the_index_is_untouched(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=4, progress=False)
    other = CorpusSpec(**{**TINY.__dict__, "name": "tiny2"})
    ingest(other, index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    ingest(corpus_copy(tmp_path, keep={"d1"}), index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    ids = set(stored_texts(index_at(tmp_path / "idx")))
    assert ids == {"tiny:d1#0"} | {f"tiny2:d{i}#0" for i in range(1, 7)}


def test_an_index_built_before_hashes_were_kept_is_compared_by_its_stored_chunks(tmp_path):
    index = index_at(tmp_path / "idx")
    ingest(TINY, index, index.embedder, progress=False)
    index._conn().execute("DELETE FROM docs")  # what an older clinprog left: chunks, no document hashes
    index._conn().execute("DELETE FROM meta")
    index._conn().commit()
    unchanged = ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    assert (unchanged.changed_docs, unchanged.added, unchanged.skipped) == (0, 0, 6)
    report = ingest(corpus_copy(tmp_path, keep={"d1", "d2"}, edit=revised), index_at(tmp_path / "idx"),
                    HashEmbedder(), progress=False)
    assert (report.changed_docs, report.removed_docs, report.added) == (2, 4, 2)
    assert sorted(stored_texts(index_at(tmp_path / "idx")).values()) == [
        "REVISED d1: gout is treated with colchicine and allopurinol.",
        "REVISED d2: gout is treated with colchicine and allopurinol."]


class Crash(Exception):
    pass


class DiesAfter(HashEmbedder):
    """Embeds `batches` batches, then dies: an ingest killed between removing the old chunks and adding all new."""

    def __init__(self, batches):
        super().__init__()
        self.left = batches

    def encode_documents(self, texts, show_progress=False):
        if self.left == 0:
            raise Crash("killed mid-ingest")
        self.left -= 1
        return super().encode_documents(texts)


@pytest.mark.parametrize("batches", [0, 1])
def test_a_crash_while_replacing_then_another_edit_leaves_nothing_stale(tmp_path, batches):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), batch_size=2, progress=False)
    with pytest.raises(Crash):
        ingest(corpus_copy(tmp_path, edit=revised), LocalIndex(tmp_path / "idx", DiesAfter(batches),
                                                               bm25_backend="numpy"),
               DiesAfter(batches), batch_size=2, progress=False)
    with pytest.raises(RetrievalError, match="inconsistent"):  # mid-replacement: refused, not served half old
        index_at(tmp_path / "idx").search("gout", 3)

    def again(record):  # the corpus changes once more before the rerun
        record["body"] = f"THIRD {record['id']}: anemia is treated with iron."
        return record

    report = ingest(corpus_copy(tmp_path, "third.jsonl", edit=again), index_at(tmp_path / "idx"), HashEmbedder(),
                    batch_size=2, progress=False)
    assert report.added == 6
    index = index_at(tmp_path / "idx")
    assert index.consistent() == [] and index.count() == 6
    assert all(text.startswith("THIRD") for text in stored_texts(index).values())


def test_a_process_that_opened_the_index_before_a_re_index_never_serves_the_removed_text(tmp_path):
    reader = index_at(tmp_path / "idx")
    ingest(TINY, reader, reader.embedder, progress=False)
    reader = index_at(tmp_path / "idx")
    assert reader.search("isoniazid rifampin tuberculosis", 1)[0].text.startswith("Active tuberculosis")
    ingest(corpus_copy(tmp_path, edit=revised), index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    hits = reader.search("isoniazid rifampin tuberculosis", 6)  # its FAISS/BM25 still rank the old vectors
    assert all(p.text.startswith("REVISED") for p in hits)


def test_vids_are_never_reused_after_the_last_documents_are_replaced(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), progress=False)

    def edit_d6(record):
        return revised(record) if record["id"] == "d6" else record

    ingest(corpus_copy(tmp_path, edit=edit_d6), index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    vids = dict(index_at(tmp_path / "idx")._conn().execute("SELECT id, vid FROM chunks"))
    assert vids["tiny:d6#0"] == 6 and max(vids.values()) == 6  # not vid 5 again, the replaced chunk's


def test_weaviate_refuses_a_changed_corpus_in_one_line(tmp_path):
    client = MagicMock()
    client.collections.exists.return_value = True
    col = client.collections.get.return_value
    description = {"embedder": "hash-bow@64", "dim": 64, "corpora": {"tiny": "an-older-hash"}}
    col.config.get.return_value = SimpleNamespace(description=json.dumps(description))
    from retrieval.weaviate_backend import WeaviateIndex

    index = WeaviateIndex(HashEmbedder(), client=client)
    with pytest.raises(RetrievalError, match=r"corpus tiny changed since it was indexed into Weaviate collection "
                                             r"ClinprogChunks.*delete the collection"):
        ingest(TINY, index, HashEmbedder(), progress=False)
    col.batch.fixed_size.assert_not_called()
    fresh = SimpleNamespace(description=json.dumps({"embedder": "hash-bow@64", "dim": 64}))
    col.config.get.return_value = fresh
    col.data.exists.return_value = False
    col.batch.failed_objects = []
    assert ingest(TINY, index, HashEmbedder(), progress=False).added == 6
    recorded = json.loads(col.config.update.call_args.kwargs["description"])
    assert recorded["embedder"] == "hash-bow@64" and set(recorded["corpora"]) == {"tiny"}


def test_a_corpus_copied_verbatim_under_another_file_name_changes_nothing(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(FIXTURES / "tiny.jsonl", copy)
    report = ingest(CorpusSpec(**{**TINY.__dict__, "paths": [str(copy)]}), index_at(tmp_path / "idx"),
                    HashEmbedder(), progress=False)
    assert (report.changed_docs, report.removed_docs, report.added, report.finalize) == (0, 0, 0, None)


def test_an_empty_corpus_is_one_line_and_removes_nothing(tmp_path):
    ingest(TINY, index_at(tmp_path / "idx"), HashEmbedder(), progress=False)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(RetrievalError, match=r"corpus tiny: no document with text in .*empty\.jsonl; nothing indexed, "
                                             r"nothing removed"):
        ingest(CorpusSpec(**{**TINY.__dict__, "paths": [str(empty)]}), index_at(tmp_path / "idx"), HashEmbedder(),
               progress=False)
    index = index_at(tmp_path / "idx")
    assert index.consistent() == [] and index.count() == 6
