"""`predictions.jsonl`: one JSON record per finished item, appended, flushed and fsynced; read back to resume.
A torn last line (a crash mid-write) is moved aside to `<file>.torn`; a broken line anywhere else is one error."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import json_input
from common.errors import ClinprogError
from common.logs import printable

log = logging.getLogger(__name__)


class PredictionLogError(ClinprogError):
    """A predictions file that cannot be resumed from (a hand-broken line, a record without its id)."""


class PredictionLog:
    def __init__(self, path: str | Path, key: Callable[[dict[str, Any]], str],
                 check: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        """`check`: why a record cannot make the outputs (the contract's `record_problem`), or None."""
        self.path = Path(path)
        self.key = key
        self.check = check
        self._lock = threading.Lock()

    def read(self) -> dict[str, dict[str, Any]]:
        """Records by id (a later record of the same id wins); repairs a torn last line first."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        records: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(lines, 1):
            if line.strip():
                self._add(records, self._parse(line, n), n)
        if tail.strip():
            try:
                record = self._parse(tail, len(lines) + 1)
            except PredictionLogError:
                self._set_aside(tail, len(raw) - len(tail))
            else:  # complete JSON that only lacks its newline: keep it, and end the line
                self._add(records, record, len(lines) + 1)
                with self.path.open("ab") as fh:
                    fh.write(b"\n")
                    _sync(fh)
        return records

    def _parse(self, line: bytes, n: int) -> dict[str, Any]:
        try:
            record = json_input.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PredictionLogError(f"{self.path}:{n}: not a JSON record ({exc}); fix or delete that line, "
                                     "or rerun into a new folder") from None
        if not isinstance(record, dict):
            raise PredictionLogError(f"{self.path}:{n}: a record must be a JSON object")
        return record

    def _add(self, records: dict[str, dict[str, Any]], record: dict[str, Any], n: int) -> None:
        try:
            rid = str(self.key(record))
        except (KeyError, TypeError):
            raise PredictionLogError(f"{self.path}:{n}: record without its id field") from None
        problem = self.check(record) if self.check else None
        if problem:
            raise PredictionLogError(f"{self.path}:{n}: the record of {printable(rid, limit=80)!r} cannot make the "
                                     f"outputs ({problem}); fix that line, or delete it and rerun the run's command "
                                     "to run that case again")
        records[rid] = record

    def _set_aside(self, tail: bytes, keep: int) -> None:
        aside = self.path.with_name(self.path.name + ".torn")
        with aside.open("ab") as fh:
            fh.write(tail + b"\n")
            _sync(fh)
        with self.path.open("r+b") as fh:
            fh.truncate(keep)
            _sync(fh)
        log.warning("%s: the last line was torn by an interrupted write (%d bytes); moved to %s, that item runs again",
                    self.path, len(tail), aside)

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, self.path.open("ab") as fh:
            fh.write(data)
            _sync(fh)

    def set_aside(self, suffix: str) -> Path | None:
        """Move the whole log out of the way (a fresh start); returns where it went."""
        if not self.path.exists():
            return None
        target = self.path.with_name(f"{self.path.name}.{suffix}")
        os.replace(self.path, target)
        return target


def _sync(fh) -> None:
    fh.flush()
    os.fsync(fh.fileno())
