"""bm25s' numba kernels compiled once per machine, not once per process: numba's on-disk cache, turned on for the
kernels `bm25s.retrieve` runs (bm25s sets no `cache=True`): the index part of a second process's start-up drops from
about 5 s to 0.26 s (benchmarks/README.md, "Start-up"). `retrieval/local.py` calls `enable_numba_cache` before it
imports bm25s; its names stay importable from there."""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
# bm25s' numba kernels that `retrieve` compiles; their dispatchers get numba's on-disk cache (bm25s sets no cache=True).
NUMBA_MODULES = ("bm25s.numba.selection", "bm25s.numba.retrieve_utils")


def numba_cache_dir() -> Path:
    """Where compiled bm25s kernels are kept: $NUMBA_CACHE_DIR (numba's own variable), else `numba/` in
    $CLINPROG_CACHE_DIR, else the repository's `.cache/numba`."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]).expanduser()
    if os.environ.get("CLINPROG_CACHE_DIR"):
        return Path(os.environ["CLINPROG_CACHE_DIR"]).expanduser() / "numba"
    return ROOT / ".cache" / "numba"


@functools.cache
def enable_numba_cache() -> Path | None:
    """Point numba's cache at `numba_cache_dir()` and turn it on for bm25s' kernels, so only the first process
    compiles them (seconds) and later ones load the machine code. Call it before bm25s is imported; once per process.
    Returns the folder, or None when it is not writable (then each process compiles, as without this)."""
    path = numba_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        # numba would otherwise fall back to __pycache__ inside site-packages: rather compile each time
        log.warning("numba cache %s is not writable (%s): bm25s compiles again in every process", path, exc)
        return None
    # numba reads NUMBA_CACHE_DIR when imported (and again when the environment changes); set its config too, in
    # case something imported numba before us.
    os.environ["NUMBA_CACHE_DIR"] = str(path)
    if "numba" in sys.modules:
        from numba.core import config

        config.CACHE_DIR = str(path)
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    for name in NUMBA_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another bm25s layout: nothing cached, nothing broken
            continue
        for fn in vars(module).values():
            # A parallel and a serial dispatcher of one Python function would share cache entries (numba's index key
            # ignores target options): only the serial one (`n_threads=1`, what `_bm25_search` runs) is cached.
            if isinstance(fn, Dispatcher) and isinstance(getattr(fn, "_cache", None), NullCache) \
                    and not getattr(fn, "targetoptions", {}).get("parallel"):
                try:
                    fn.enable_caching()
                except (AttributeError, TypeError, OSError) as exc:  # numba internals moved: compile as before
                    log.warning("numba cache not enabled for %s.%s: %s", name, fn.__name__, exc)
    return path
