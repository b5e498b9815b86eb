"""The grounding verdict of an answer sentence: the note supports it, says otherwise, or does not say it. One set of
words for every grounding check (similarity.py, claims.py, learned.py), the learned verifier's
labels (verifier/perturb.py) and what a run writes (predictions.jsonl, report.html, the served response)."""

SUPPORTED, CONTRADICTED, NOT_IN_NOTE = "supported", "contradicted", "not in the note"


def flagged(verdict: dict) -> bool:
    """Is this answer sentence's verdict a flag (contradicted or not in the note)?"""
    return verdict.get("verdict") != SUPPORTED
