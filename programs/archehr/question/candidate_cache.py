"""The fine-tuned question stage's candidates in DSPy's cache, as DSPy keeps an LM's replies (a decode costs ~1.5 s a
message). The key holds everything that decides them: the message, the settings, the base file, the adapter, the
instruction, the llama.cpp build and kernels, and a digest of the decoder's source."""

from __future__ import annotations

import hashlib
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import dspy

from common.files import file_version

KIND = "clinprog.question.finetuned.candidates"
DECODER_MODULES = ("programs.archehr.question.finetuned", "programs.archehr.question.chat_prompt",
                   "programs.archehr.question.text", "lms.llama_batch", "lms.gguf_causal_lm", "lms.gguf_merge")


@lru_cache(maxsize=1)
def decoder_digest() -> str:
    """sha256 over the decoder's source files, the llama.cpp binding's version and the kernels its build uses."""
    import importlib

    import llama_cpp

    digest = hashlib.sha256()
    for name in DECODER_MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        digest.update(name.encode() + b"\0" + Path(str(module.__file__)).read_bytes() + b"\0")
    digest.update(str(llama_cpp.__version__).encode() + b"\0" + llama_cpp.llama_print_system_info())
    return digest.hexdigest()


def model_identity(path: Path) -> dict[str, Any]:
    """The base GGUF as the key sees it (a replaced file is another model)."""
    resolved, size, mtime_ns = file_version(path)
    return {"path": resolved, "size": size, "mtime_ns": mtime_ns}


def cached(request: dict[str, Any], decode: Any) -> list[tuple[str, float, bool]]:
    """`decode()`'s candidates for `request`, from DSPy's cache when it holds them (then stored there)."""
    request = {"kind": KIND, "decoder": decoder_digest(), **request}
    hit = dspy.cache.get(request)
    if hit is not None:
        return [(str(q), float(s), bool(whole)) for q, s, whole in hit]
    found = decode()
    dspy.cache.put(request, [list(c) for c in found])
    return found
