"""One error type for every LM setup problem, so the CLI can print it as one line."""

from common.errors import ClinprogError


class LMConfigError(ClinprogError, RuntimeError):
    """A backend cannot be used: missing API key, unreachable server, missing model file."""
