"""The grounding verdict of an answer sentence: the note supports it, says otherwise, or does not say it. One set of
words for every grounding check and what a run writes (predictions.jsonl, report.html, the served response)."""

SUPPORTED, CONTRADICTED, NOT_IN_NOTE = "supported", "contradicted", "not in the note"
MAX_PREMISE_SENTENCES = 3  # the cited note sentences a verifier or the LM judge reads with an answer sentence


def flagged(verdict: dict) -> bool:
    """Is this answer sentence's verdict a flag (contradicted or not in the note)?"""
    return verdict.get("verdict") != SUPPORTED
