"""One error type for every LM setup problem, so the CLI can print it as one line."""


class LMConfigError(RuntimeError):
    """A backend cannot be used: missing API key, unreachable server, missing model file."""
