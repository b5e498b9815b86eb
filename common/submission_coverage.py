"""Which reference items a submission file covers; each program's scorer treats missing and extra ids as its official
script does."""

from __future__ import annotations

from typing import Any

SHOWN = 5  # ids named in the printed line


def coverage(reference_ids: list[str], submitted_ids: list[str], only_submitted: bool) -> dict[str, Any]:
    submitted, references = set(submitted_ids), set(reference_ids)
    missing = [i for i in reference_ids if i not in submitted]
    extra = sorted(submitted - references)
    return {"references": len(reference_ids), "submitted": len(submitted), "covered": len(references & submitted),
            "missing": len(missing), "missing_first": missing[:SHOWN], "extra": len(extra), "extra_first": extra[:SHOWN],
            "only_submitted": only_submitted}


def first_ids(ids: list[str], total: int) -> str:
    return ", ".join(ids) + (", ..." if total > len(ids) else "")


def foreign(cov: dict[str, Any], path: Any, id_kind: str, items: str, source: Any, example: str,
            reference: str) -> str | None:
    """The one-line error when none of the submitted ids is a reference id (a submission for other data)."""
    if not cov["submitted"] or cov["covered"]:
        return None
    return (f"{path}: none of its {cov['submitted']} {id_kind} ids is among the {cov['references']} {items} of "
            f"{source} (e.g. {example} vs {reference}): is it the submission for these {items}?")


def coverage_problem(cov: dict[str, Any], noun: str, missing_rule: str, extra_rule: str) -> str | None:
    """One line when the submission does not hold exactly the reference ids: counts, first ids and the rules."""
    if not cov["missing"] and not cov["extra"]:
        return None
    parts = [f"submission covers {cov['covered']} of {cov['references']} {noun}"]
    if cov["missing"]:
        parts.append(f"{cov['missing']} missing ({first_ids(cov['missing_first'], cov['missing'])}): {missing_rule}")
    if cov["extra"]:
        parts.append(f"{cov['extra']} {extra_rule} ({first_ids(cov['extra_first'], cov['extra'])})")
    return "; ".join(parts)
