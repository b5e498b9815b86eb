"""Third-party log noise kept out of the console and main.log unless `verbose=true` (clinprog's own loggers keep
INFO, everyone else's WARNING and above); `printable` escapes a user-supplied value, so no input can forge a log line."""

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
    """`text` for one log line: control characters escaped, cut to `limit` characters (None: whole)."""
    text = str(text)
    cut = text if limit is None else text[:limit]
    safe = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in cut)
    return safe + ("..." if limit is not None and len(text) > limit else "")


def error_text(exc: BaseException | str) -> str:
    """`error: <message>` as one line per problem (a message may join several with "\nerror: "), every other control
    character escaped."""
    return "\n".join(f"error: {printable(part, limit=None)}" for part in str(exc).split("\nerror: "))


class ThirdPartyFilter(logging.Filter):
    """Lets clinprog's records through at any level and other libraries' from WARNING up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".", 1)[0] in OWN


def quiet_third_party(verbose: bool = False) -> None:
    """Install the filter on the root handlers (Hydra's console and main.log) and lower the noisy loggers."""
    if not verbose:
        # transformers reads this switch when first imported: one already imported is told directly
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
    # its warnings say only that Ctrl-C cancelled its threads, which the interrupted line says
    logging.getLogger("dspy.utils.parallelizer").setLevel(logging.ERROR)
