"""Read corpora (JSONL, CSV, plain text; optionally gzip-compressed) into chunks, with a field mapping from config,
and hash each document's chunks: how a re-index knows which documents changed or went away."""

from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import json_input
from retrieval.chunking import chunk_text
from retrieval.passage import RetrievalError


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    paths: list[str]
    format: str = "jsonl"                    # jsonl | csv | txt
    id_field: str | None = "id"              # txt: the file stem is the id
    text_field: str = "text"
    title_fields: list[str] = field(default_factory=list)
    title_separator: str = " - "
    source_field: str | None = None
    source: str | None = None                # a constant source name when the records have none
    metadata_fields: list[str] = field(default_factory=list)
    chunk_size: int = 1000
    chunk_overlap: int = 200
    on_duplicate: str = "error"              # a doc id seen twice: error (one line, both places) | skip (counted)


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    title: str
    text: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def embedding_text(self) -> str:
        """Documents are embedded as the seed did: `TITLE: ...\\nTEXT: ...`."""
        return f"TITLE: {self.title}\nTEXT: {self.text}"


def resolve_paths(spec: CorpusSpec) -> list[Path]:
    files: list[Path] = []
    for pattern in spec.paths:
        matches = sorted(glob.glob(str(Path(pattern).expanduser())))
        if not matches:
            raise RetrievalError(f"corpus {spec.name}: no file matches {pattern}")
        files.extend(Path(m) for m in matches)
    return files


def corpus_hash(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _open_text(path: Path) -> io.TextIOBase:
    return io.TextIOWrapper(_open_bytes(path), encoding="utf-8", newline="")


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Line by line from bytes, so a decoding error names its own line."""
    n = 0
    with _open_bytes(path) as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RetrievalError(f"{path}:{n}: not UTF-8 (byte 0x{raw[exc.start]:02x}); convert the file to "
                                     "UTF-8") from None
            if not line.strip():
                continue
            try:
                record = json_input.loads(line)
            except json.JSONDecodeError as exc:
                raise RetrievalError(f"{path}:{n}: malformed JSON line ({exc.msg})") from None
            if not isinstance(record, dict):
                raise RetrievalError(f"{path}:{n}: a corpus line must be a JSON object, not {type(record).__name__}")
            yield f"{path}:{n}", record


def _records(spec: CorpusSpec, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (where, record) pairs; `where` names the file and line for error messages. Bad bytes, a truncated
    gzip stream and lines that are not JSON objects are one `RetrievalError` naming the file and line."""
    where = str(path)
    try:
        if spec.format == "jsonl":
            for where, record in _jsonl(path):
                yield where, record
        elif spec.format == "csv":
            with _open_text(path) as fh:
                for n, row in enumerate(csv.DictReader(fh), 2):
                    where = f"{path}:{n}"
                    yield where, row
        elif spec.format == "txt":
            with _open_text(path) as fh:
                stem = path.name.split(".")[0]
                yield str(path), {"id": stem, spec.text_field: fh.read(), "title": stem}
        else:
            raise RetrievalError(f"corpus {spec.name}: unknown format {spec.format!r} (jsonl, csv, txt)")
    except UnicodeDecodeError as exc:
        raise RetrievalError(f"{where}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); convert the file to UTF-8") \
            from None
    except (EOFError, gzip.BadGzipFile, OSError, csv.Error) as exc:
        raise RetrievalError(f"{where}: cannot be read after this line ({type(exc).__name__}: {exc}); a truncated "
                             "or corrupted file?") from None


def iter_chunks(spec: CorpusSpec, duplicates: list[str] | None = None) -> Iterator[Chunk]:
    """The chunks of every record. A doc id seen twice is an error naming both places, or with
    `on_duplicate=skip` the later record is skipped and its place appended to `duplicates`."""
    if spec.on_duplicate not in ("error", "skip"):
        raise RetrievalError(f"corpus.on_duplicate must be error or skip, not {spec.on_duplicate!r}")
    first_seen: dict[str, str] = {}
    for path in resolve_paths(spec):
        for where, rec in _records(spec, path):
            text = rec.get(spec.text_field)
            if not isinstance(text, str):
                raise RetrievalError(f"{where}: no text field {spec.text_field!r}")
            doc_id = str(rec.get(spec.id_field or "id") or "")
            if not doc_id:
                raise RetrievalError(f"{where}: no id field {spec.id_field!r}")
            if doc_id in first_seen:
                if spec.on_duplicate == "error":
                    raise RetrievalError(f"{where}: duplicate doc id {doc_id!r} (first at {first_seen[doc_id]}); "
                                         "fix the corpus or set corpus.on_duplicate=skip")
                if duplicates is not None:
                    duplicates.append(where)
                continue
            first_seen[doc_id] = where
            title = spec.title_separator.join(str(rec[f]) for f in spec.title_fields if rec.get(f))
            source = str(rec.get(spec.source_field) or "") if spec.source_field else (spec.source or spec.name)
            meta = {f: rec.get(f) for f in spec.metadata_fields if f in rec}
            for i, piece in enumerate(chunk_text(text, spec.chunk_size, spec.chunk_overlap)):
                yield Chunk(f"{chunk_prefix(spec.name, doc_id)}{i}", doc_id, title, piece, source, meta)


def chunk_prefix(corpus: str, doc_id: str) -> str:
    """Every chunk id of a document starts with this."""
    return f"{corpus}:{doc_id}#"


def chunk_number(chunk_id: str, prefix: str) -> int | None:
    """n of `<prefix><n>` (`corpus:doc#n`), None when the id is not one of that document's chunk ids."""
    rest = chunk_id[len(prefix):] if chunk_id.startswith(prefix) else ""
    return int(rest) if re.fullmatch(r"[0-9]+", rest) else None


def doc_hash(chunks: Iterable[Chunk]) -> str:
    """sha256 over a document's chunks in chunk order, as they are stored and embedded (metadata with sorted keys,
    so a stored copy hashes the same): a changed text, title, metadata field or chunking setting changes it."""
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
