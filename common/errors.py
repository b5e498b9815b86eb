"""One base class for every error a user can fix: `main.py` prints it as one `error:` line (exit code 2)."""

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

E = TypeVar("E", bound=BaseException)


class ClinprogError(Exception):
    """A problem with the user's input, configuration or environment; the message says what and where."""


class ConfigError(ClinprogError, ValueError):
    """A configuration value that cannot work (unknown stage implementation, bad threshold)."""


class RunFolderError(ClinprogError):
    """A run folder that cannot be resumed safely: another run holds it, or it was made by another config."""


def number_in(where: str, value: Any, low: float, high: float | None = None, *, low_open: bool = False,
              high_open: bool = False, integer: bool = False, null: bool = False, note: str = "") -> Any:
    """The setting `where` as a number in [low, high] (an end open when `low_open`/`high_open`; no `high`: unbounded;
    an int when `integer`, a float otherwise; None when `null` allows it). A bool, a non-number, NaN, infinity or a
    value outside is one line: `{where} must be a number in [0, 1), not 'abc'`, `... an integer from 1 to 5 ...`."""
    if value is None and null:
        return None
    if (not isinstance(value, bool) and isinstance(value, int if integer else int | float)
            and (integer or abs(value) <= sys.float_info.max)  # a float: not NaN, inf or a huge int
            and (value > low or (value == low and not low_open))
            and (high is None or value < high or (value == high and not high_open))):
        return int(value) if integer else float(value)
    if high is None:
        span = f"{'>' if low_open else '>='} {low:.12g}"
    elif integer:
        span = f"from {low:.12g} to {high:.12g}"
    else:
        span = f"in {'(' if low_open else '['}{low:.12g}, {high:.12g}{')' if high_open else ']'}"
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise ConfigError(f"{where} must be {'an integer' if integer else 'a number'} {span}{' or null' * null}"
                      f"{f' ({note})' if note else ''}, not {shown}")


def unknown_setting(key: str, owner: str, known: Iterable[str] | None, hint: str = "") -> ConfigError:
    """The one line for a key `owner` (a class, a config group's option, a config section) does not take:
    `{key}: not a setting of {owner}; its settings: a, b, c` (None: its settings are not known), then `hint`."""
    listed = "" if known is None else f"; its settings: {', '.join(sorted(known)) or 'none'}"
    return ConfigError(f"{key}: not a setting of {owner}{listed}" + (f"; {hint}" if hint else ""))


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
        unknown = _unknown_key(cause, full_key, str(exc))
        if unknown is not None:
            raise unknown from None
        raise


def _unknown_key(cause: BaseException | None, full_key: str, message: str) -> ConfigError | None:
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
        params = None
    return unknown_setting(f"{full_key}.{found[1]}" if full_key else found[1], target[1], params)


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
