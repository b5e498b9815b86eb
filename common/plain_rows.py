"""Rows of a table a user hands in as JSON lines (`.jsonl`) or CSV (`.csv`, a header row), each as {column: text}.
Whatever makes a row unusable is refused before any model loads, in one line naming the file, the row and the field.
Unknown columns are ignored (exports carry more), and said once in the log."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import json_input
from common.errors import ClinprogError, ConfigError, number_in
from common.logs import printable
from common.note_text import SPLITS
from common.unicode_text import lone_surrogate

SUFFIXES = (".jsonl", ".csv")
# Besides a lone surrogate, not text: what XML 1.0 cannot hold (the run writes the notes as the task's XML);
# vertical tab and form feed (page breaks in PDF exports) are read as line breaks.
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\ufffe\uffff]")
_BREAKS = str.maketrans({"\x0b": "\n", "\x0c": "\n"})
log = logging.getLogger(__name__)


class PlainInputError(ClinprogError, ValueError):
    """A plain input file or row that cannot be used; the message names the file, the row and the field."""


@dataclass(frozen=True)
class Table:
    """The columns a reader expects, and their size limits: {column: (most characters, the knob that sets it)}."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    max_chars: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    id_column: str = "id"


@dataclass(frozen=True)
class Row:
    number: int                 # the JSON line, or the CSV row (its header is row 1)
    where: str                  # "<file>, line 3 (id 'a1')": the start of every message about this row
    values: dict[str, str]      # the table's columns the row has, stripped; an empty optional one is left out
    file: str = ""              # the file it was read from (a folder's rows: each its own)


def is_plain(path: str | Path) -> bool:
    return Path(str(path)).suffix.lower() in SUFFIXES


def read_rows(path: str | Path, table: Table) -> list[Row]:
    """The rows of `path` (.jsonl or .csv), checked against `table`; at least one."""
    path = Path(path)
    if problem := not_a_file(path):
        raise PlainInputError(problem)
    text = _decode(path)
    unit = "line" if path.suffix.lower() == ".jsonl" else "row"
    raw = _jsonl(path, text) if unit == "line" else _csv(path, text, table)
    rows: list[Row] = []
    first: dict[str, int] = {}
    unknown: set[str] = set()
    for number, record in raw:
        row = _check(f"{path}, {unit} {number}", number, record, table, str(path))
        rid = row.values[table.id_column]
        if rid in first:
            raise PlainInputError(f"{row.where}: duplicate id (first at {unit} {first[rid]}); ids must be unique")
        first[rid] = number
        unknown |= set(record) - set(table.required) - set(table.optional)
        rows.append(row)
    if not rows:
        raise PlainInputError(f"{path}: no rows (expected columns {', '.join(table.required)})")
    if unknown:
        log.warning("%s: columns %s are not read (known: %s)", path, printable(str(sorted(unknown)), limit=300),
                    ", ".join(table.required + table.optional))
    return rows


def not_a_file(path: Path) -> str | None:
    """Why `path` cannot be read as an input file, saying what to name; None for a regular file."""
    if path.is_file():
        return None
    if path.is_dir():
        return f"{path}: a folder, not a file; name the file itself"
    if path.exists():  # a FIFO would block the read forever, a device never ends
        return f"{path}: not a regular file (a FIFO, socket or device); name a file saved on disk"
    return f"{path}: no such file{'' if path.is_absolute() else f' in {Path.cwd()}'}"


def read_folder(folder: str | Path, table: Table, column: str, suffix: str = ".txt") -> list[Row]:
    """One row per `*<suffix>` file of `folder`, in name order: the file's stem is the id, its text the `column`."""
    folder = Path(folder)
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == suffix)
    if not files:
        raise PlainInputError(f"{folder}: no {suffix} files (one note per file, the file name as its id)")
    rows: list[Row] = []
    first: dict[str, Path] = {}
    for number, file in enumerate(files, 1):
        row = _check(str(file), number, {table.id_column: file.stem, column: _decode(file)}, table, str(file))
        rid = row.values[table.id_column]
        if rid in first:
            raise PlainInputError(f"{file}: the same id as {first[rid].name} (ids are file names without {suffix})")
        first[rid] = file
        rows.append(row)
    return rows


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # never read with replacement characters: the model would read them as text
        line = data.count(b"\n", 0, exc.start) + 1
        raise PlainInputError(f"{path}, line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                              "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")  # a byte order mark (Excel's "CSV UTF-8") is not part of the first column


def _jsonl(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json_input.loads(line)
        except json.JSONDecodeError as exc:
            raise PlainInputError(f"{path}, line {n}: not a JSON object ({exc.msg}, column {exc.colno})") from None
        if not isinstance(record, dict):
            raise PlainInputError(f"{path}, line {n}: a JSON {type(record).__name__}, not an object of columns")
        out.append((n, record))
    return out


def _csv(path: Path, text: str, table: Table) -> list[tuple[int, dict[str, Any]]]:
    n = 1
    # the csv module refuses a cell over 131072 characters: let the columns' own limits speak, for this read only
    cell_limit = max([131072, *(2 * most for most, _ in table.max_chars.values())])
    before = csv.field_size_limit(cell_limit)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)  # a quote left open is an error
        columns = [c.strip() for c in reader.fieldnames or []]
        reader.fieldnames = columns
        twice = sorted({c for c in columns if c and columns.count(c) > 1})
        if twice:  # DictReader keeps the last of two cells of one name: the other would be dropped in silence
            raise PlainInputError(f"{path}, row 1 (the header): column {printable(twice[0], limit=60)!r} appears "
                                  f"{columns.count(twice[0])} times; name each column once")
        missing = [c for c in table.required if c not in columns]
        if missing:
            other = next((name for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars"))
                          if len(columns) == 1 and sep in columns[0]), None)
            hint = f"; its header is separated by {other}: save it with commas (a .csv is read comma-separated)" \
                if other else ""
            raise PlainInputError(f"{path}, row 1 (the header): no column {', '.join(map(repr, missing))}; found "
                                  f"{printable(str(columns), limit=300)} (needs {', '.join(table.required)}){hint}")
        out = []
        for n, record in enumerate(reader, 2):
            if None in record:
                raise PlainInputError(f"{path}, row {n}: more cells than the header's {len(columns)} columns")
            if not any((v or "").strip() for v in record.values()):
                continue  # a blank line or an all-empty row a spreadsheet pads with
            if None in record.values():  # a row cut short
                given = sum(v is not None for v in record.values())
                raise PlainInputError(f"{path}, row {n}: {given} of the header's {len(columns)} cells")
            out.append((n, record))
        return out
    except csv.Error as exc:  # e.g. a cell over cell_limit characters
        if "field larger than field limit" in str(exc):  # the csv module names neither the column nor the knob
            most, knob = max(table.max_chars.values(), default=(cell_limit // 2, "the column limit"))
            raise PlainInputError(f"{path}, row {n + 1}: a cell over {cell_limit:,} characters, more than any column "
                                  f"may hold (the largest limit is {knob}={most}); shorten it, or raise {knob} if "
                                  "that column needs more") from None
        raise PlainInputError(f"{path}, row {n + 1}: malformed CSV ({exc})") from None
    finally:
        csv.field_size_limit(before)


def _check(where: str, number: int, record: dict[str, Any], table: Table, file: str) -> Row:
    rid = record.get(table.id_column)
    if isinstance(rid, str | int) and not isinstance(rid, bool) and str(rid).strip():
        where = f"{where} (id {printable(str(rid).strip(), limit=60)!r})"
    values: dict[str, str] = {}
    for name in table.required + table.optional:
        value = _text(record.get(name), where, name)
        if value is None or not value.strip():
            if name in table.required:
                said = "no field" if name not in record else "an empty field"
                raise PlainInputError(f"{where}: {said} {name!r} (each row needs {', '.join(table.required)})")
            continue
        value = value.translate(_BREAKS)
        at = lone_surrogate(value)  # JSON's "\ud800" escape: no tokenizer takes it, no output file can hold it
        if at is None:
            match = _NOT_TEXT.search(value)
            at = match.start() if match else None
        if at is not None:
            kind = "a lone surrogate" if "\ud800" <= value[at] <= "\udfff" else "a control character"
            raise PlainInputError(f"{where}: field {name!r} holds {kind} (U+{ord(value[at]):04X} at character {at}), "
                                  "not text; check the exporter's encoding")
        limit = table.max_chars.get(name)
        if limit is not None and len(value) > limit[0]:
            raise PlainInputError(f"{where}: field {name!r} has {len(value):,} characters, over {limit[1]}={limit[0]}")
        values[name] = value.strip()
    return Row(number, where, values, file)


def _text(value: Any, where: str, name: str) -> str | None:
    """A cell as text: a string; a number (an id); a list of strings (sentences or phrases), one per line."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):  # JSON's NaN and Infinity, which Python reads: an id 'nan' is no one's
            raise PlainInputError(f"{where}: field {name!r} is {value!r}, not text or a number; write it as a "
                                  "string or a finite number")
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise PlainInputError(f"{where}: field {name!r} is a JSON {type(value).__name__}, not text (a string, or a list "
                          "of strings)")


def limit(settings: Mapping[str, Any], name: str, knob: str) -> tuple[int, str]:
    """`settings[name]` as a size limit (a positive integer) with the knob that sets it, for `Table.max_chars`."""
    return number_in(knob, settings.get(name), 1, integer=True), knob


def split_mode(settings: Mapping[str, Any], knob: str) -> str:
    """`settings["split"]`: how a note becomes sentences (`common/note_text.split_note`)."""
    value = settings.get("split", SPLITS[0])
    if value not in SPLITS:
        raise ConfigError(f"{knob} must be one of {', '.join(SPLITS)} (lines: each line one sentence, as given), "
                          f"not {value!r}")
    return str(value)


def plain_fingerprint(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What of `data.plain` changes the numbered sentences, for a run's fingerprint (the default split left out, so
    older run folders still resume)."""
    split = settings.get("split", SPLITS[0])
    return {"max_sentence_chars": settings.get("max_sentence_chars"), **({"split": split} if split != SPLITS[0] else {})}
