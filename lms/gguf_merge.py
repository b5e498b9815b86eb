"""A LoRA adapter merged into a copy of its base GGUF, for llama.cpp (the fast way to run a fine-tuned small model
on a CPU: ~10x transformers' fp32 decoding here).

Each adapted linear layer of the base is dequantised, gets W + scale * B A, and is written as float16; every other
tensor and every metadata field is copied as it is (the base's own quantisation). Llama-architecture GGUFs store
the query and key projections with their rows permuted for llama.cpp's rotary layout (convert_hf_to_gguf's
`permute`); a delta computed in the Hugging Face layout gets the same permutation. The merged file is written once
per (base, adapter) into a cache folder and reused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

_HF_TO_GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"}


def gguf_name(hf_name: str) -> str:
    """model.layers.29.mlp.down_proj -> blk.29.ffn_down.weight"""
    parts = hf_name.split(".")
    if len(parts) != 5 or parts[:2] != ["model", "layers"] or ".".join(parts[3:]) not in _HF_TO_GGUF:
        raise ValueError(f"cannot place adapter tensor {hf_name!r} in a llama GGUF")
    return f"blk.{parts[2]}.{_HF_TO_GGUF['.'.join(parts[3:])]}.weight"


def rope_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf's LlamaModel.permute: rows regrouped per head for llama.cpp's rotary layout."""
    rows = weights.shape[0]
    return weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _field_value(field: Any) -> Any:
    return field.contents()


def merge_into_gguf(base: Path, tensors: dict[str, tuple[np.ndarray, np.ndarray]], scale: float, out: Path) -> Path:
    import gguf

    reader = gguf.GGUFReader(str(base))
    arch = _field_value(reader.fields["general.architecture"])
    if arch != "llama":
        raise ValueError(f"{base}: merging an adapter needs a llama-architecture GGUF, not {arch!r}")
    n_head = int(_field_value(reader.fields["llama.attention.head_count"]))
    n_head_kv = int(_field_value(reader.fields["llama.attention.head_count_kv"]))
    deltas: dict[str, np.ndarray] = {}
    for name, (a, b) in tensors.items():
        delta = scale * (np.asarray(b, dtype=np.float32) @ np.asarray(a, dtype=np.float32))
        if name.endswith("q_proj"):
            delta = rope_permute(delta, n_head)
        elif name.endswith("k_proj"):
            delta = rope_permute(delta, n_head_kv)
        deltas[gguf_name(name)] = delta
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        types = field.types
        sub = types[1] if types and types[0] == gguf.GGUFValueType.ARRAY and len(types) > 1 else None
        writer.add_key_value(key, _field_value(field), types[0], sub_type=sub)
    missing = set(deltas)
    for t in reader.tensors:
        if t.name in deltas:
            weight = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            if weight.shape != deltas[t.name].shape:
                raise ValueError(f"adapter {t.name} is {deltas[t.name].shape}, the base's {weight.shape}")
            writer.add_tensor(t.name, (weight + deltas[t.name]).astype(np.float16))
            missing.discard(t.name)
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    if missing:
        raise ValueError(f"the base GGUF has no tensors {sorted(missing)[:3]} that the adapter adapts")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)  # whole or not at all: a killed merge leaves no half file under the final name
    return out


def merged_gguf(base: Path, adapter_id: str, tensors: dict[str, tuple[np.ndarray, np.ndarray]], scale: float,
                cache_dir: Path) -> Path:
    """The merged GGUF for this (base, adapter), written on first use into `cache_dir`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    out = cache_dir / f"{base.stem}+{adapter_id}.gguf"
    if not out.is_file():
        merge_into_gguf(base, tensors, scale, out)
    return out
