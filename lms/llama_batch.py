"""Several continuations of one prompt decoded together on a llama.cpp context of their own. The prompt is read once
into sequence 0 and shared through the unified KV cache; each step evaluates one token of every unfinished sequence
in one batch (5 sequences on 2 cores: ~2.5x one token, not 5x). Deterministic: each prompt starts from an empty cache
and is read in the same chunks; a saved prefix is always read alone into an empty cache and copied back.
Owned by one loaded model (`gguf_causal_lm.merged_llama`) and used under its lock."""

from __future__ import annotations

import atexit
import ctypes
import threading
from typing import Any

import numpy as np

_BATCH = 512  # tokens per llama_decode call: a longer prompt is read in chunks
_PREFIXES = 8  # instruction prefixes kept (one per register and instruction in use)
_OPEN: list[BatchDecoder] = []
_OPEN_LOCK = threading.Lock()


class BatchDecodeError(RuntimeError):
    """llama.cpp refused a batch (its cache is full or the input is invalid)."""


class BatchDecoder:
    def __init__(self, llm: Any, n_seq: int, n_ctx: int, threads: int = 1) -> None:
        import llama_cpp

        self._api = llama_cpp
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, _BATCH, _BATCH
        params.n_seq_max, params.kv_unified = n_seq, True
        params.swa_full = False  # no stderr warning for a sliding-window model; the window exceeds these contexts
        # the CPU's flash attention sums a token's keys in per-thread parts, so logits changed with the thread count;
        # the plain attention computes each output on one thread
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.threads = max(1, int(threads))
        params.n_threads = params.n_threads_batch = self.threads
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise BatchDecodeError(f"llama.cpp could not make a context of {n_ctx} tokens for {n_seq} sequences")
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(_BATCH, 0, n_seq)
        self.n_seq, self.n_ctx, self.n_vocab = n_seq, n_ctx, llm.n_vocab()
        self._prefixes: dict[tuple[int, ...], bytes] = {}
        with _OPEN_LOCK:
            _OPEN.append(self)

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """items: (token, position, sequence, want its logits)."""
        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, int(logits)
            b.seq_id[i][0] = seq
        b.n_tokens = len(items)
        rc = self._api.llama_decode(self.ctx, b)
        if rc != 0:
            raise BatchDecodeError(f"llama_decode returned {rc} for a batch of {len(items)} tokens")

    def _logits(self, row: int) -> np.ndarray:
        return np.ctypeslib.as_array(self._api.llama_get_logits_ith(self.ctx, row), shape=(self.n_vocab,)).copy()

    def _read(self, tokens: list[int], begin: int, last_logits: bool) -> None:
        """Sequence 0 reads `tokens` from position `begin`, in chunks of _BATCH counted from `begin`."""
        for offset in range(0, len(tokens), _BATCH):
            chunk = tokens[offset:offset + _BATCH]
            self._decode([(t, begin + offset + j, 0, last_logits and offset + j == len(tokens) - 1)
                          for j, t in enumerate(chunk)])

    def _restore_prefix(self, prefix: list[int]) -> None:
        """Put sequence 0's cells for `prefix` into the empty cache: read and saved the first time, copied back after."""
        key = tuple(prefix)
        state = self._prefixes.get(key)
        if state is None:
            self._read(prefix, 0, last_logits=False)
            size = self._api.llama_state_seq_get_size(self.ctx, 0)
            buffer = (ctypes.c_uint8 * size)()
            written = self._api.llama_state_seq_get_data(self.ctx, buffer, size, 0)
            if written != size:
                raise BatchDecodeError(f"llama.cpp saved {written} of {size} bytes of a prompt's cache")
            if len(self._prefixes) >= _PREFIXES:
                self._prefixes.pop(next(iter(self._prefixes)))
            self._prefixes[key] = bytes(buffer)
            return
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if self._api.llama_state_seq_set_data(self.ctx, buffer, len(state), 0) != len(state):
            raise BatchDecodeError("llama.cpp could not restore a prompt's cache")

    def start(self, tokens: list[int], n_seq: int, threads: int | None = None, prefix: int = 0) -> np.ndarray:
        """Read `tokens` as the prompt of sequences 0..n_seq-1; the logits of the next token (the same for all).
        `threads`: for this prompt and its steps (the results do not depend on it). `prefix`: how many leading tokens
        every prompt of this kind shares (the instruction): read alone into an empty cache, saved and restored."""
        if not tokens or n_seq > self.n_seq or not 0 <= prefix < len(tokens):
            raise BatchDecodeError(f"a prompt of {len(tokens)} tokens (prefix {prefix}) for {n_seq} of {self.n_seq} "
                                   "sequences")
        if threads is not None:
            self.threads = max(1, int(threads))
            self._api.llama_set_n_threads(self.ctx, self.threads, self.threads)
        self._api.llama_memory_clear(self.memory, True)
        if prefix:
            self._restore_prefix(tokens[:prefix])
        self._read(tokens[prefix:], prefix, last_logits=True)
        for seq in range(1, n_seq):
            self._api.llama_memory_seq_cp(self.memory, 0, seq, -1, -1)
        return self._logits(-1)

    def step(self, position: int, tokens: dict[int, int]) -> dict[int, np.ndarray]:
        """One token for each sequence in `tokens` (sequence -> token) at `position`; each one's next logits."""
        order = sorted(tokens)
        self._decode([(tokens[seq], position, seq, True) for seq in order])
        return {seq: self._logits(i) for i, seq in enumerate(order)}

    def close(self) -> None:
        if self.ctx:
            self._api.llama_batch_free(self.batch)
            self._api.llama_free(self.ctx)
            self.ctx = None


@atexit.register
def _close_all() -> None:
    """Contexts go before the models they were made from (a context freed after its model can crash the exit)."""
    with _OPEN_LOCK:
        for decoder in _OPEN:
            decoder.close()
        _OPEN.clear()
