"""Weaviate (weaviate-client v4) backend, the scale-out path: our own vectors + BM25 hybrid search, sharding and
replication from config. Unit-tested without a server; integration-tested against `WEAVIATE_URL` when it is set."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

import numpy as np

from retrieval.corpus import Chunk
from retrieval.embed import Embedder
from retrieval.passage import Passage, RetrievalError

PROPERTIES = ("chunk_id", "doc_id", "title", "text", "source", "metadata")


def chunk_properties(chunk: Chunk) -> dict[str, Any]:
    return {"chunk_id": chunk.id, "doc_id": chunk.doc_id, "title": chunk.title, "text": chunk.text,
            "source": chunk.source, "metadata": json.dumps(chunk.metadata)}


def passage_from_object(obj: Any) -> Passage:
    props = obj.properties
    meta = json.loads(props.get("metadata") or "{}")
    score = getattr(obj.metadata, "score", None)
    return Passage(id=props["chunk_id"], text=props.get("text", ""), title=props.get("title", ""),
                   source=props.get("source", ""), score=float(score) if score is not None else 0.0,
                   metadata={**meta, "doc_id": props.get("doc_id")})


class WeaviateIndex:
    def __init__(
        self,
        embedder: Embedder,
        *,
        url: str | None = None,
        host: str = "localhost",
        port: int = 8080,
        grpc_port: int = 50051,
        cloud_url: str | None = None,
        api_key_env: str = "WEAVIATE_API_KEY",
        collection: str = "ClinprogChunks",
        alpha: float = 0.5,
        shards: int = 1,
        replication_factor: int = 1,
        batch_size: int = 200,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        self.embedder = embedder
        self.collection_name = collection
        self.alpha, self.shards, self.replication_factor = alpha, shards, replication_factor
        self.batch_size = batch_size
        if url:  # WEAVIATE_URL style: http://host:port (gRPC on grpc_port)
            parsed = urlparse(url)
            host, port = parsed.hostname or host, parsed.port or port
        self.host, self.port, self.grpc_port, self.cloud_url = host, port, grpc_port, cloud_url
        self.api_key_env, self.timeout_s = api_key_env, timeout_s
        self._client = client

    # ---------------------------------------------------------------- connection
    def client(self):
        if self._client is not None:
            return self._client
        import weaviate
        from weaviate.classes.init import AdditionalConfig, Auth, Timeout

        key = os.environ.get(self.api_key_env)
        auth = Auth.api_key(key) if key else None
        config = AdditionalConfig(timeout=Timeout(init=self.timeout_s, query=60, insert=120))
        where = self.cloud_url or f"{self.host}:{self.port} (gRPC {self.grpc_port})"
        if self.cloud_url and auth is None:
            raise RetrievalError(f"retriever=weaviate with cloud_url needs an API key in {self.api_key_env}")
        try:
            if self.cloud_url:
                self._client = weaviate.connect_to_weaviate_cloud(cluster_url=self.cloud_url, auth_credentials=auth,
                                                                  additional_config=config)
            else:
                self._client = weaviate.connect_to_local(host=self.host, port=self.port, grpc_port=self.grpc_port,
                                                         auth_credentials=auth, additional_config=config)
        except Exception as exc:
            raise RetrievalError(
                f"retriever=weaviate: no Weaviate server answers at {where} ({type(exc).__name__}). Start one, e.g. "
                "`docker run -p 8080:8080 -p 50051:50051 cr.weaviate.io/semitechnologies/weaviate:1.32.0`, or set "
                "retriever.url / retriever.cloud_url") from None
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _collection(self):
        return self.client().collections.get(self.collection_name)

    # ---------------------------------------------------------------- ingestion
    def prepare(self, corpus: str, corpus_hash: str, reindex: list[str] | None = None) -> list[str]:
        """Create the collection (or reopen it). This backend does not track documents: a corpus whose files changed
        since it was indexed (its hash is in the collection's description) is refused, never served half old."""
        from weaviate.classes.config import Configure, DataType, Property, Tokenization

        client = self.client()
        if not client.collections.exists(self.collection_name):
            client.collections.create(
                self.collection_name,
                description=json.dumps({"embedder": self.embedder.name, "dim": self.embedder.dim}),
                vector_config=Configure.Vectors.self_provided(),
                properties=[
                    Property(name="chunk_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD,
                             index_searchable=False),
                    Property(name="doc_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD,
                             index_searchable=False),
                    Property(name="title", data_type=DataType.TEXT),
                    Property(name="text", data_type=DataType.TEXT),
                    Property(name="source", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
                    Property(name="metadata", data_type=DataType.TEXT, index_searchable=False,
                             index_filterable=False),
                ],
                sharding_config=Configure.sharding(desired_count=self.shards),
                replication_config=Configure.replication(factor=self.replication_factor),
            )
        self.check_embedder()
        recorded = self._description()
        corpora = recorded.get("corpora") if isinstance(recorded.get("corpora"), dict) else {}
        if corpora.get(corpus) not in (None, corpus_hash):
            raise RetrievalError(
                f"corpus {corpus} changed since it was indexed into Weaviate collection {self.collection_name}, and "
                "retriever=weaviate does not replace changed documents: delete the collection and index again, or "
                "index the new files under another corpus.name (retriever=local replaces changed documents)")
        if corpora.get(corpus) is None:  # recorded before the first chunk is added
            description = {"embedder": self.embedder.name, "dim": self.embedder.dim, **recorded,
                           "corpora": {**corpora, corpus: corpus_hash}}
            self._collection().config.update(description=json.dumps(description))
        return []

    def _description(self) -> dict[str, Any]:
        config = self._collection().config.get()
        try:
            recorded = json.loads(config.description or "{}")
        except (json.JSONDecodeError, TypeError):
            recorded = {}
        return recorded if isinstance(recorded, dict) else {}

    def check_embedder(self) -> None:
        recorded = self._description()
        if recorded and (recorded.get("embedder") != self.embedder.name or int(recorded.get("dim", 0)) != self.embedder.dim):
            raise RetrievalError(
                f"Weaviate collection {self.collection_name} was built with embedder {recorded.get('embedder')} "
                f"(dim {recorded.get('dim')}); this run uses {self.embedder.name} (dim {self.embedder.dim})")

    def existing_ids(self, ids: list[str]) -> set[str]:
        from weaviate.util import generate_uuid5

        col = self._collection()
        return {cid for cid in ids if col.data.exists(generate_uuid5(cid))}

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        """Batch import; returns the number of failed objects (their errors are reported, not swallowed)."""
        from weaviate.util import generate_uuid5

        col = self._collection()
        with col.batch.fixed_size(batch_size=self.batch_size) as batch:
            for chunk, vec in zip(chunks, vectors, strict=True):
                batch.add_object(properties=chunk_properties(chunk), vector=vec.tolist(), uuid=generate_uuid5(chunk.id))
        failed = col.batch.failed_objects
        if failed:
            first = failed[0]
            print(f"weaviate: {len(failed)} objects failed to import; first: {getattr(first, 'message', first)}")
        return len(failed)

    def finalize(self) -> dict[str, Any]:
        total = self._collection().aggregate.over_all(total_count=True).total_count
        return {"count": total, "collection": self.collection_name}

    def consistent(self) -> list[str]:
        return []  # the server keeps its vector and inverted indexes consistent with the objects it stores

    # ---------------------------------------------------------------- search
    def search(self, query: str, k: int) -> list[Passage]:
        from weaviate.classes.query import MetadataQuery

        vector = self.embedder.encode_queries([query])[0].tolist()
        res = self._collection().query.hybrid(query=query, vector=vector, alpha=self.alpha, limit=k,
                                              return_metadata=MetadataQuery(score=True))
        return [passage_from_object(o) for o in res.objects]

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        return [self.search(q, k) for q in queries]
