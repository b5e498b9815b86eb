"""Third-party log noise kept out of the console and main.log unless `verbose=true`: clinprog's own loggers keep INFO,
everyone else's (faiss's failed AVX512 import, bm25s and numba DEBUG, rouge-score's per-text INFO) reach the
handlers at WARNING and above. `printable` escapes a user-supplied value in a log line, so no input can write a line
of its own into main.log."""

from __future__ import annotations

import logging
import os
import sys

# Packages of this repository: their INFO lines are the run's own messages.
OWN = ("__main__", "clinprog", "common", "runners", "programs", "tasks", "retrieval", "lms", "optimizers", "serving",
       "reports", "signatures", "benchmarks", "hydra")
# Loggers that attach their own handlers or log below INFO before our filter could see them: set their level too.
NOISY = ("faiss", "faiss.loader", "bm25s", "numba", "absl", "httpx", "httpcore", "LiteLLM", "litellm", "urllib3",
         "sentence_transformers", "transformers", "filelock", "huggingface_hub", "weaviate", "mlflow", "alembic",
         "matplotlib", "PIL", "asyncio", "uvicorn.access", "submitit", "joblib", "optuna", "jax", "h5py")


def printable(text: object, limit: int | None = 200) -> str:
    """`text` for one log line: newlines and other control characters escaped, so a user-supplied value (a case id,
    a client's request) cannot forge log lines; cut to `limit` characters (None: whole)."""
    text = str(text)
    cut = text if limit is None else text[:limit]
    safe = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in cut)
    return safe + ("..." if limit is not None and len(text) > limit else "")


def error_text(exc: BaseException | str) -> str:
    """`error: <message>` as one line per problem (a message may join several with "\nerror: "): every other newline
    or control character a message carries (a case id, a file name, a library's text) escaped, so an error cannot
    print or log a line of its own."""
    return "\n".join(f"error: {printable(part, limit=None)}" for part in str(exc).split("\nerror: "))


def _own(name: str) -> bool:
    return name.split(".", 1)[0] in OWN


class ThirdPartyFilter(logging.Filter):
    """Lets clinprog's records through at any level and other libraries' from WARNING up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or _own(record.name)


def quiet_third_party(verbose: bool = False) -> None:
    """Install the filter on the root handlers (Hydra's console and main.log) and lower the noisy loggers."""
    if not verbose:
        # transformers draws a "Loading weights" bar per model load; it reads this switch when first imported, so a
        # transformers already imported (a run started from Python, not the shell) is told directly.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "transformers.utils.logging" in sys.modules:
            sys.modules["transformers.utils.logging"].disable_progress_bar()
    root = logging.getLogger()
    if verbose:
        for handler in root.handlers:
            for f in [f for f in handler.filters if isinstance(f, ThirdPartyFilter)]:
                handler.removeFilter(f)
        for name in (*NOISY, "dspy.utils.parallelizer"):
            logging.getLogger(name).setLevel(logging.NOTSET)
        return
    for handler in root.handlers:
        if not any(isinstance(f, ThirdPartyFilter) for f in handler.filters):
            handler.addFilter(ThirdPartyFilter())
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    # its warnings say only that Ctrl-C cancelled its threads, which the interrupted line says (runners/dispatch.py)
    logging.getLogger("dspy.utils.parallelizer").setLevel(logging.ERROR)
