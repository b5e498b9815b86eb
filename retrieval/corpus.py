"""Read corpora (JSONL, CSV, plain text; optionally gzip-compressed) into chunks, with a field mapping from config."""

from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _records(spec: CorpusSpec, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (where, record) pairs; `where` names the file and line for error messages."""
    with _open_text(path) as fh:
        if spec.format == "jsonl":
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield f"{path}:{n}", json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise RetrievalError(f"{path}:{n}: malformed JSON line ({exc.msg})") from None
        elif spec.format == "csv":
            for n, row in enumerate(csv.DictReader(fh), 2):
                yield f"{path}:{n}", row
        elif spec.format == "txt":
            stem = path.name.split(".")[0]
            yield str(path), {"id": stem, spec.text_field: fh.read(), "title": stem}
        else:
            raise RetrievalError(f"corpus {spec.name}: unknown format {spec.format!r} (jsonl, csv, txt)")


def iter_chunks(spec: CorpusSpec) -> Iterator[Chunk]:
    for path in resolve_paths(spec):
        for where, rec in _records(spec, path):
            text = rec.get(spec.text_field)
            if not isinstance(text, str):
                raise RetrievalError(f"{where}: no text field {spec.text_field!r}")
            doc_id = str(rec.get(spec.id_field or "id") or "")
            if not doc_id:
                raise RetrievalError(f"{where}: no id field {spec.id_field!r}")
            title = spec.title_separator.join(str(rec[f]) for f in spec.title_fields if rec.get(f))
            source = str(rec.get(spec.source_field) or "") if spec.source_field else (spec.source or spec.name)
            meta = {f: rec.get(f) for f in spec.metadata_fields if f in rec}
            for i, piece in enumerate(chunk_text(text, spec.chunk_size, spec.chunk_overlap)):
                yield Chunk(f"{spec.name}:{doc_id}#{i}", doc_id, title, piece, source, meta)
