"""Per-document content hashes: how a re-index knows which documents of a corpus changed or went away.

A document's hash covers every chunk as it is stored and embedded (chunk id, title, text, source, metadata), so a
changed answer, title, metadata field or chunking setting changes it; the hash of the stored chunks equals the hash
of the corpus's chunks exactly when the index holds that document's current text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from retrieval.corpus import Chunk


def chunk_number(chunk_id: str, prefix: str) -> int | None:
    """n of `<prefix><n>` (`corpus:doc#n`), None when the id is not one of that document's chunk ids."""
    rest = chunk_id[len(prefix):] if chunk_id.startswith(prefix) else ""
    return int(rest) if re.fullmatch(r"[0-9]+", rest) else None


def chunk_prefix(corpus: str, doc_id: str) -> str:
    """Every chunk id of a document starts with this (see `retrieval.corpus.iter_chunks`)."""
    return f"{corpus}:{doc_id}#"


def doc_hash(chunks: Iterable[Chunk]) -> str:
    """sha256 over a document's chunks in chunk order (metadata with sorted keys, so a stored copy hashes the same)."""
    digest = hashlib.sha256()
    for c in sorted(chunks, key=lambda c: int(c.id.rsplit("#", 1)[1])):
        record: list[Any] = [c.id, c.title, c.text, c.source, c.metadata]
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def doc_hashes(chunks: Iterable[Chunk]) -> dict[str, str]:
    """{doc_id: hash} of a corpus's chunks, in first-seen document order."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    return {doc: doc_hash(cs) for doc, cs in by_doc.items()}
