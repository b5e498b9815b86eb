"""Which bundled case files the shipped learned state was fitted or chosen on: scores on them measure fit, not
unseen notes, and the printed scores say so in one line."""

from __future__ import annotations

import hashlib
from pathlib import Path

# the file's name under paths.data/archehr -> what the shipped state did with it
FITTED = {
    "bundled_cases.xml": "3 easy fictional cases, the validation cases the learned heads were chosen on "
                         "(experiment=compile_heads)",
    "dev_cases.xml": "training cases of the learned question stage and heads (experiment=compile_question, "
                     "compile_heads)",
    "realistic_cases_a.xml": "training cases of the learned heads and the reader verifier (experiment=compile_heads, "
                             "compile_reader_verifier)",
    "realistic_cases_b.xml": "training cases of the learned heads and the reader verifier (experiment=compile_heads, "
                             "compile_reader_verifier)",
}
UNSEEN = "python benchmarks/archehr_no_lm_cv.py"   # every case scored by heads fitted on the other folds


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def caveat(cases: str | Path, data_dir: str | Path) -> str | None:
    """One line when `cases` holds the same bytes as a bundled file in FITTED (under any name), else None."""
    path = Path(str(cases))
    if not path.is_file():
        return None
    digest = None
    for name, use in FITTED.items():
        bundled = Path(str(data_dir)) / "archehr" / name
        if bundled.is_file() and bundled.stat().st_size == path.stat().st_size:
            digest = digest or _sha256(path)
            if digest == _sha256(bundled):
                return (f"{name}: {use}, so these scores are not a measure of unseen notes (held-out folds: "
                        f"{UNSEEN})")
    return None
