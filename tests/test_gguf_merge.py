"""The adapter merged into the base GGUF: what llama.cpp runs is W + scale * B A (float16), and nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest

from lms.gguf_causal_lm import BaseModel
from lms.gguf_merge import merged_gguf

pytestmark = pytest.mark.unit

ADAPTED = "model.layers.3.mlp.down_proj"  # not a rotary (q/k) projection: the delta lands as computed


def test_the_merged_model_holds_w_plus_the_scaled_delta_and_copies_every_other_tensor(tmp_path):
    import gguf

    base = BaseModel().path()
    reader = gguf.GGUFReader(str(base))
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
