"""Which reference notes a submission covers: missing ids count as wrong (official), extra ids are ignored."""

from __future__ import annotations

from typing import Any

SHOWN = 5  # ids named in the printed line


def coverage(reference_ids: list[str], submitted_ids: list[str]) -> dict[str, Any]:
    submitted, references = set(submitted_ids), set(reference_ids)
    missing = [i for i in reference_ids if i not in submitted]
    extra = [i for i in submitted_ids if i not in references]
    return {"references": len(reference_ids), "submitted": len(submitted), "covered": len(references & submitted),
            "missing": len(missing), "missing_first": missing[:SHOWN], "extra": len(extra), "extra_first": extra[:SHOWN]}


def describe(cov: dict[str, Any], only_submitted: bool) -> str | None:
    """One line for the console and report; None when the submission covers exactly the reference notes."""
    if not cov["missing"] and not cov["extra"]:
        return None
    parts = [f"submission covers {cov['covered']} of {cov['references']} reference notes"]
    if cov["missing"]:
        first = ", ".join(cov["missing_first"]) + (", ..." if cov["missing"] > SHOWN else "")
        how = ("not scored (data.score_only_submitted=true)" if only_submitted
               else "scored as wrong, as the official script does; data.score_only_submitted=true scores only the "
                    "submitted notes, data.limit=N the first N")
        parts.append(f"{cov['missing']} missing ({first}): {how}")
    if cov["extra"]:
        first = ", ".join(cov["extra_first"]) + (", ..." if cov["extra"] > SHOWN else "")
        parts.append(f"{cov['extra']} extra ids not in the notes, ignored ({first})")
    return "; ".join(parts)
