"""One base class for every error a user can fix: `main.py` prints it as one `error:` line (exit code 2)."""


class ClinprogError(Exception):
    """A problem with the user's input, configuration or environment; the message says what and where."""


class ConfigError(ClinprogError, ValueError):
    """A configuration value that cannot work (unknown stage implementation, bad threshold)."""


class RunFolderError(ClinprogError):
    """A run folder that cannot be resumed safely: another run holds it, or it was made by another config."""


def import_failure(exc: BaseException) -> str:
    """The line of Hydra's "Error loading 'x.y'" message that says why (`ModuleNotFoundError("No module named 'x'")`);
    its first line otherwise."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    return next((line.strip() for line in lines if "Error(" in line), lines[0])
