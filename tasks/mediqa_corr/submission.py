"""The official submission line: `<text-id> <flag> <sentence-id> "<corrected sentence>"`, or `<text-id> 0 -1 NA`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tasks.mediqa_corr.data import TEXT_ID, MediqaDataError

# The official scorer's line pattern: the text id, the flag, the sentence id, the correction
LINE = re.compile(TEXT_ID.pattern + r"\s[0-9]+\s\-?[0-9]+\s.+")


@dataclass(frozen=True)
class Correction:
    text_id: str
    flag: int
    sentence_id: int
    corrected: str  # "NA" when flag == 0
    # as written in a submission file: the official scorer compares strings ("01" is not "1")
    flag_text: str | None = None
    sentence_id_text: str | None = None
    official_crash: str | None = None  # why the official scorer stops on this line (see official_escapes)

    @property
    def flag_as_written(self) -> str:
        return self.flag_text if self.flag_text is not None else str(self.flag)

    @property
    def sentence_id_as_written(self) -> str:
        return self.sentence_id_text if self.sentence_id_text is not None else str(self.sentence_id)

    def line(self) -> str:
        if self.flag == 0:
            return f"{self.text_id} 0 -1 NA"
        # backslashes doubled: the official parser reads a line as a re template (see official_escapes)
        sentence = " ".join(self.corrected.split()).replace("\\", "\\\\")
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


def official_lines(text: str) -> list[str]:
    """The lines as the official scorer reads them (universal newlines): split at \\n, \\r\\n and \\r only, so
    U+2028, U+0085 and the other separators `str.splitlines` knows stay inside a line."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def read_submission(path: str | Path, invalid: list[str] | None = None) -> dict[str, Correction]:
    """A submission as the official scorer parses it: a line that fails its pattern is skipped (and appended to
    `invalid` as `file:line: text`); a later line of the same text id wins."""
    path = Path(path)
    if not path.is_file():
        raise MediqaDataError(f"{path}: no such submission file")
    try:
        text_lines = official_lines(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MediqaDataError(f"{path}: not UTF-8 (byte {exc.start}); save the submission as UTF-8") from None
    out: dict[str, Correction] = {}
    for n, raw in enumerate(text_lines, 1):
        if not raw.strip():
            continue
        correction = parse_line(raw)
        if correction is None:
            if invalid is not None:
                invalid.append(f"{path}:{n}: {raw.strip()[:100]}")
            continue
        out[correction.text_id] = correction
    return out


def official_escapes(line: str) -> tuple[str, str | None]:
    """The official parser hands each line to `re.sub` as the replacement template (its arguments are swapped), so
    Python's template escapes apply (`\\n` is whitespace) and one it rejects (`\\k`, `\\1`) stops it with re.error.
    Returns (the line as it reads it, None), or (the line unchanged, why the official scorer crashes)."""
    if "\\" not in line:
        return line, None
    try:
        return re.match(r"\s+", " ").expand(line), None  # the same template expansion, on the same match
    except (re.error, IndexError) as exc:
        return line, f"re.error: {exc}"


def parse_line(raw: str) -> Correction | None:
    """One line as the official scorer reads it (quotes stripped, flag "0" is NA); None when it fails its pattern."""
    line = raw.strip()
    if not LINE.fullmatch(line):
        return None
    line, crash = official_escapes(line)
    items = line.split()
    text = " ".join(items[3:]).strip()
    while text.startswith('"') and len(text) > 1:
        text = text[1:]
    while text.endswith('"') and len(text) > 1:
        text = text[:-1]
    flag, sentence_id = items[1], items[2]
    return Correction(items[0], int(flag), int(sentence_id), "NA" if flag == "0" else text,
                      flag_text=flag, sentence_id_text=sentence_id, official_crash=crash)
