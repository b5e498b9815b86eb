"""The served app's log filters: connection-level warnings once per kind (then as a count), query strings redacted
from the access log."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from common.logs import printable


class OncePerKind(logging.Filter):
    """On uvicorn's and asyncio's loggers: a warning or error of one kind (first line and exception type) is logged
    once, then at 10, 100, 1000, ... occurrences; only an application error's first one logs its traceback.
    `counts` (`/health` `connection_errors`) tells at most MAX_KINDS kinds apart."""

    MAX_KINDS = 50

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        first = str(record.msg if record.args else record.getMessage()).split("\n", 1)[0]
        if first.startswith("Exception in callback "):  # the callback's repr names objects and addresses
            first = first.split("(", 1)[0]
        kind = printable(first + (f" ({type(exc).__name__}{f' errno {exc.errno}' if getattr(exc, 'errno', None) else ''})"
                                  if exc is not None else ""), limit=160)
        with self._lock:
            if kind not in self.counts and len(self.counts) >= self.MAX_KINDS:
                kind = "other connection errors"
            self.counts[kind] += 1
            n = self.counts[kind]
        if n == 1:
            said = printable(record.getMessage().split("\n", 1)[0], limit=300)
            if exc is not None:
                said += f": {type(exc).__name__}: {printable(str(exc), limit=200)}"
            record.msg, record.args = f"{said} (logged once; repeats are counted in /health connection_errors)", None
            if isinstance(exc, OSError) or record.name == "asyncio":
                record.exc_info, record.exc_text = None, None
            return True
        if str(n).strip("0") == "1":  # 10, 100, 1000, ...
            record.msg, record.args = f"{kind}: {n} times so far", None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            return True
        return False


class RedactQuery(logging.Filter):
    """On uvicorn's access log: every query-string value is redacted (a `?token=...` is never written)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            path, _, query = args[2].partition("?")
            safe = "&".join(f"{part.split('=', 1)[0]}=[redacted]" if "=" in part else "[redacted]"
                            for part in query.split("&") if part)
            record.args = (*args[:2], f"{path}?{safe}", *args[3:])
        return True


def install_log_filters() -> OncePerKind:
    """The access-log redaction and a fresh error counter on uvicorn's and asyncio's loggers, replacing an earlier
    app's."""
    counter = OncePerKind()
    for name, new in (("uvicorn.error", counter), ("asyncio", counter), ("uvicorn.access", RedactQuery())):
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, type(new))]:
            logger.removeFilter(old)
        # first: LiteLLM's own access-log redaction on uvicorn.access rewrites the query before a later filter sees it
        logger.filters.insert(0, new)
    return counter
