"""The official 2025 submission: `submission.json` = `[{"case_id", "answer"}]`, one answer sentence a line, each
ending with the note sentence ids it cites in pipes (`... surgical intervention. |1|` or `|2,3|`), <= 75 words."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import json_input
from tasks.archehr.data import ArchEHRDataError

SUBMISSION_FILE = "submission.json"
MAX_WORDS = 75


@dataclass(frozen=True)
class ParsedAnswer:
    text: str                     # what the relevance metrics compare (citations removed, <= 75 words)
    citations: frozenset[str]     # the union of every line's cited ids, as written
    sentences: tuple[tuple[str, tuple[str, ...]], ...]


def parse_answer(answer: str, max_words: int = MAX_WORDS) -> ParsedAnswer:
    """`answer` as the official `load_submission` (soni-sarvesh/archehr-qa @ 771b948) reads it, quirks included: only
    a line's last `|...|` group cites, text after it is dropped; ids are comma-split, not stripped (`|4, 5|` cites
    " 5"); a sentence gets a final "." unless it ends in . ! or ?; the text is cut to 75 words split on " "."""
    sentences: list[tuple[str, tuple[str, ...]]] = []
    for line in answer.strip().split("\n"):
        if not line.strip():
            continue
        parts = line.rsplit("|", maxsplit=2)
        if len(parts) < 3:
            sentence, cited = line.strip(), ()
        else:
            sentence = parts[-3].strip()
            cited = tuple(c for c in parts[-2].split(",") if c.strip())
        if sentence and sentence[-1] not in ".!?":
            sentence += "."
        sentences.append((sentence, cited))
    text = " ".join(s for s, _ in sentences if s)
    words = [w for w in text.split(" ") if w.strip()]
    if len(words) > max_words:
        text = " ".join(words[:max_words])
    return ParsedAnswer(text, frozenset(c for _, cs in sentences for c in cs), tuple(sentences))


def cited_answer(sentences: list[tuple[str, list[str]]]) -> str:
    """Our answer in the official format: one sentence a line, its citations in pipes (none: no pipes)."""
    lines = []
    for text, ids in sentences:
        text = " ".join(text.replace("|", "/").split())  # a pipe inside the text would be read as a citation
        lines.append(f"{text} |{','.join(ids)}|" if ids else text)
    return "\n".join(lines)


def write_submission(records: list[dict[str, Any]], out_dir: str | Path) -> Path:
    path = Path(out_dir) / SUBMISSION_FILE
    items = [{"case_id": str(r["case_id"]), "answer": r["answer"]} for r in records if r.get("answer") is not None]
    path.write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_submission(path: str | Path) -> list[tuple[str, str]]:
    """`submission.json` (or a folder holding it) -> [(case_id, answer)] in file order, a case answered twice twice
    (the official script scores both); one error line for a wrong shape."""
    path = Path(path)
    if path.is_dir():
        path = path / SUBMISSION_FILE
    try:
        items = json_input.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchEHRDataError(f"{path}: cannot read the submission ({exc})".splitlines()[0]) from None
    if not isinstance(items, list):
        raise ArchEHRDataError(f"{path}: a submission is a JSON array of {{case_id, answer}} objects")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("case_id"), str) \
                or not isinstance(item.get("answer"), str):
            raise ArchEHRDataError(f"{path}: entry {i} is not {{\"case_id\": str, \"answer\": str}}: {item!r}"[:300])
        out.append((item["case_id"], item["answer"]))
    return out
