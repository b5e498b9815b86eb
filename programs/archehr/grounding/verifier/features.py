"""What the verifier reads from an (answer sentence, note sentences) pair: how the answer's tokens align with the
note's, computed from the program's own sentence encoder (its contextual token vectors and its word-piece input
embeddings); the encoder is frozen, only the head over these features is fitted.

A correct answer sentence paraphrases its note sentences (many tokens replaced by loosely similar ones); a
fabricated one usually copies the note's wording and replaces one token by a close but different one (a side, a
direction, a number) or adds or drops one (a negation, a clause). The scalar features describe the alignment (how
well each answer token is matched, how many are new, order inversions among the copied tokens, note tokens dropped
inside the aligned span, numbers not in the note); the vector feature is the element-wise product of the input
embeddings of the closest substitution (the new answer token most similar to a note token, and that token): what
kind of word was swapped for what, learnt from the training pairs rather than listed.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from common.cpu import single_thread_products, threads_for_step

SCALAR_FEATURES = ("mean_match", "min_match", "new_share", "new_tokens", "weak_tokens_0.5", "weak_tokens_0.7",
                   "order_inversions", "dropped_in_span", "dropped_share", "answer_tokens", "substitution_match",
                   "new_numbers")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def feature_names(dim: int) -> tuple[str, ...]:
    return SCALAR_FEATURES + tuple(f"substitution_{i}" for i in range(dim))


class TokenAligner:
    """Token vectors of texts from an `Embedder`'s model (loaded once, shared with the program), cached by text."""

    def __init__(self, embedder: Any, threads: int | str = "auto", cache_size: int = 4096) -> None:
        self.embedder, self.threads, self.cache_size = embedder, threads, cache_size
        self._cache: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self._inputs: np.ndarray | None = None

    def __deepcopy__(self, memo: dict) -> TokenAligner:
        return self  # a runtime resource over the shared embedder, not program state

    @property
    def model_name(self) -> str:
        return self.embedder.name

    def _parts(self) -> tuple[Any, Any]:
        from retrieval.bert_encoder import BertSentenceModel

        model = self.embedder._load()
        if isinstance(model, BertSentenceModel):  # the torch-only default: the same call shapes as transformers'
            return model.tokenizer, model.encoder
        transformer = model[0]
        return transformer.tokenizer, transformer.auto_model

    def input_embeddings(self) -> np.ndarray:
        """The model's word-piece input embeddings, unit length."""
        if self._inputs is None:
            _, encoder = self._parts()
            w = encoder.get_input_embeddings().weight.detach().numpy().astype(np.float32)
            self._inputs = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-9)
        return self._inputs

    @property
    def dim(self) -> int:
        return int(self.input_embeddings().shape[1])

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(word-piece ids, unit contextual vectors) of `text` without its special tokens; one text per forward pass,
        so a text's vectors do not depend on what else is read."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        import torch

        tokenizer, encoder = self._parts()
        single_thread_products()  # one thread per product: the vectors do not depend on the thread count
        with self._lock:  # a fast tokenizer whose truncation is set per call is not safe to share between threads
            batch = tokenizer(text, return_tensors="pt", truncation=True, max_length=256)
        with torch.inference_mode():
            hidden = encoder(**batch).last_hidden_state[0].numpy()[1:-1]
        ids = batch["input_ids"][0].numpy()[1:-1]
        vectors = hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-9)
        with self._lock:
            self._cache[text] = (ids, vectors)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return ids, vectors

    def features(self, answer: str, premise: Sequence[str]) -> np.ndarray:
        inputs = self.input_embeddings()
        dim = inputs.shape[1]
        a_ids, a_vec = self.tokens(answer)
        texts = [t for t in premise if t.strip()]
        workers = min(threads_for_step(self.threads), len(texts))
        if workers > 1:  # the step's threads take whole texts (each text's products on one thread)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                parts = list(pool.map(self.tokens, texts))
        else:
            parts = [self.tokens(t) for t in texts]
        if not len(a_ids) or not parts:
            return np.zeros(len(SCALAR_FEATURES) + dim)
        p_ids = np.concatenate([p[0] for p in parts])
        p_vec = np.concatenate([p[1] for p in parts])
        sims = a_vec @ p_vec.T
        match, nearest = sims.max(1), sims.argmax(1)
        copied = np.isin(a_ids, p_ids)
        new = ~copied
        first = {int(t): i for i, t in reversed(list(enumerate(p_ids)))}
        positions = [first[int(t)] for t in a_ids[copied]]
        pairs = len(positions) * (len(positions) - 1) / 2
        inversions = sum(positions[i] > positions[j] for i in range(len(positions))
                         for j in range(i + 1, len(positions))) / pairs if pairs else 0.0
        span = np.zeros(len(p_ids), dtype=bool)
        if positions:
            span[min(positions):max(positions) + 1] = True
        dropped = span & ~np.isin(p_ids, a_ids)
        if new.any():
            j = np.flatnonzero(new)[int(np.argmax(match[new]))]
            substitution = inputs[a_ids[j]] * inputs[p_ids[nearest[j]]]
            substitution_match = float(match[j])
        else:
            substitution, substitution_match = np.zeros(dim), 0.0
        numbers = set(_NUMBER.findall(answer)) - set(_NUMBER.findall(" ".join(premise)))
        scalars = [float(match.mean()), float(match.min()), float(new.mean()), float(new.sum()),
                   float((match < 0.5).sum()), float((match < 0.7).sum()), float(inversions), float(dropped.sum()),
                   float(dropped.sum() / span.sum()) if span.any() else 0.0, float(len(a_ids)), substitution_match,
                   float(len(numbers))]
        return np.concatenate([np.asarray(scalars), substitution])
