"""The grounding verdict of an answer sentence, as every check and every output writes it."""

SUPPORTED, CONTRADICTED, NOT_IN_NOTE = "supported", "contradicted", "not in the note"
MAX_PREMISE_SENTENCES = 3  # the cited note sentences a verifier or the LM judge reads with an answer sentence


def flagged(verdict: dict) -> bool:
    return verdict.get("verdict") != SUPPORTED
