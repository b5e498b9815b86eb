"""One base class for every error a user can fix: `main.py` prints it as one `error:` line (exit code 2)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

E = TypeVar("E", bound=BaseException)


class ClinprogError(Exception):
    """A problem with the user's input, configuration or environment; the message says what and where."""


class ConfigError(ClinprogError, ValueError):
    """A configuration value that cannot work (unknown stage implementation, bad threshold)."""


class RunFolderError(ClinprogError):
    """A run folder that cannot be resumed safely: another run holds it, or it was made by another config."""


def import_failure(exc: BaseException) -> str:
    """The line of Hydra's "Error loading 'x.y'" message that says why; its first line otherwise."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    return next((line.strip() for line in lines if "Error(" in line), lines[0])


def wrapped(exc: BaseException, kind: type[E]) -> E | None:
    """`exc` or the first exception in its cause/context chain that is a `kind` (Hydra wraps a builder's error,
    omegaconf a resolver's); None when none is."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def through_instantiate() -> Iterator[None]:
    """A `ClinprogError` raised while Hydra's `instantiate` builds an object is raised as itself, not wrapped in
    `InstantiationException` once per nesting level. Only `__cause__` is followed: an exception merely raised while
    handling ours is not ours."""
    from hydra.errors import InstantiationException

    try:
        yield
    except InstantiationException as exc:
        cause: BaseException | None = exc
        full_key = ""
        while isinstance(cause, InstantiationException):
            full_key = _full_key(str(cause)) or full_key  # the innermost: the node the builder was given
            cause = cause.__cause__
        if isinstance(cause, ClinprogError):
            raise _keyed(cause, full_key) from None
        unknown = _unknown_setting(cause, full_key, str(exc))
        if unknown is not None:
            raise unknown from None
        raise


def _unknown_setting(cause: BaseException | None, full_key: str, message: str) -> ConfigError | None:
    """A key the target does not take (`+tracking.bogus=1`) as one line naming the ones it does. Only a TypeError
    raised by the call itself (one traceback frame: the arguments did not bind), not one from inside the target."""
    import inspect
    import re

    found = re.search(r"unexpected keyword argument '(\w+)'", str(cause)) if isinstance(cause, TypeError) else None
    target = re.search(r"Error in call to target '([\w.]+)'", message)
    tb = cause.__traceback__ if cause is not None else None
    if found is None or target is None or tb is None or tb.tb_next is not None:
        return None
    try:
        from hydra.utils import get_method

        params = [n for n, p in inspect.signature(get_method(target[1])).parameters.items()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except Exception:  # noqa: BLE001 - its settings are a courtesy; the line stands without them
        params = []
    where = f"{full_key}.{found[1]}" if full_key else found[1]
    return ConfigError(f"{where}: not a setting of {target[1]}" + (f"; its settings: {', '.join(params)}" if params
                                                                   else ""))


def _full_key(message: str) -> str:
    """The config node Hydra names at the end of its message (`full_key: program.embedder`); "" when none."""
    last = message.rstrip().rsplit("\n", 1)[-1]
    return last.removeprefix("full_key:").strip() if last.startswith("full_key:") else ""


def _keyed(exc: ClinprogError, full_key: str) -> ClinprogError:
    """`exc` naming its knob from the config's root (`program.embedder.threads`, what the user types), not from its
    own node (`embedder.threads`)."""
    message = str(exc)
    head, _, parent = full_key.rpartition(".")
    if not head or not message.startswith(parent + "."):
        return exc
    try:
        return type(exc)(f"{head}.{message}")
    except TypeError:  # an error class with its own constructor: the message as it was
        return exc
