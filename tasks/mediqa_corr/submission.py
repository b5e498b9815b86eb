"""The official submission line: `<text-id> <flag> <sentence-id> "<corrected sentence>"`, or `<text-id> 0 -1 NA`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tasks.mediqa_corr.data import MediqaDataError

# The official scorer's line pattern.
LINE = re.compile(r"[a-z0-9\-]+\s[0-9]+\s\-?[0-9]+\s.+")


@dataclass(frozen=True)
class Correction:
    text_id: str
    flag: int
    sentence_id: int
    corrected: str  # "NA" when flag == 0

    def line(self) -> str:
        if self.flag == 0:
            return f"{self.text_id} 0 -1 NA"
        sentence = " ".join(self.corrected.split())
        return f'{self.text_id} 1 {self.sentence_id} "{sentence}"'


def no_error(text_id: str) -> Correction:
    return Correction(text_id, 0, -1, "NA")


def write_submission(corrections: list[Correction], path: str | Path) -> Path:
    path = Path(path)
    lines = [c.line() for c in corrections]
    for line in lines:
        if not LINE.fullmatch(line):
            raise ValueError(f"refusing to write a line the official scorer rejects: {line!r}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_submission(path: str | Path) -> dict[str, Correction]:
    """Parse a submission as the official scorer does (quotes stripped, flag 0 -> NA); invalid lines are errors."""
    path = Path(path)
    if not path.is_file():
        raise MediqaDataError(f"{path}: no such submission file")
    out: dict[str, Correction] = {}
    try:
        text_lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise MediqaDataError(f"{path}: not UTF-8 (byte {exc.start}); save the submission as UTF-8") from None
    for n, raw in enumerate(text_lines, 1):
        line = raw.strip()
        if not line:
            continue
        if not LINE.fullmatch(line):
            raise MediqaDataError(f"{path}:{n}: not an official submission line: {line[:100]!r}")
        items = line.split()
        text = " ".join(items[3:]).strip()
        while text.startswith('"') and len(text) > 1:
            text = text[1:]
        while text.endswith('"') and len(text) > 1:
            text = text[:-1]
        flag = int(items[1])
        out[items[0]] = Correction(items[0], flag, int(items[2]), "NA" if flag == 0 else text)
    return out
