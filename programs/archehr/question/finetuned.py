"""Stage 1 without an API LM, learned: SmolLM2-135M-Instruct with a LoRA adapter (`optimizer=finetune`) writes the
clinician question, in the `consumer` or `clinician` register (`auto`: a logistic head over the message chooses).

The greedy reply and `samples` sampled ones are reranked by mean token log-probability + `coverage_weight` x the share
of their content words the message uses - `opening_weight` x the share of training references opening with the same
four words, so an over-learned template must win on its merits. A question sharing no word with the message is never
returned: the message's first question sentence is, with the reason in `fallback`.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dspy
import numpy as np

from common.control_tokens import has_control_tokens
from common.cpu import threads_now, threads_setting
from common.errors import ConfigError, number_in
from common.parameters import LearnedStateError, LogisticHead, LoraAdapter
from lms.gguf_causal_lm import BaseModel, batch_decoder, gguf_architecture, merged_llama
from programs.archehr.question import candidate_cache
from programs.archehr.question import finetune as question_finetune
from programs.archehr.question.chat_prompt import ChatFormat, build_prompt, chat_format, prompt_parts
from programs.archehr.question.finetune import INSTRUCTIONS
from programs.archehr.question.rerank import content_stems, coverage, opening_penalties
from programs.archehr.question.text import (
    finish_question,
    first_question_sentence,
    fit_to_budget,
    normalise_message,
    opening,
    reply_fits,
)
from programs.archehr.text import truncate_words

REGISTERS = ("consumer", "clinician")
REGISTER_FEATURE_SET = "register/1"


def reply_complete(text: str, max_words: int) -> bool:
    """True once `finish_question` would drop anything decoded after `text`: it has its '?', its first line has
    ended, or its question has begun a word past the limit."""
    reply = text.lstrip()
    return "?" in reply or "\n" in reply or not reply_fits(reply, max_words)


def top_tokens(logp: np.ndarray, k: int) -> np.ndarray:
    """The ids of the `k` most probable tokens, most probable first (ties: the lower id first), found among those
    within a few nats of the best: np.argpartition over all 49,152 logits took ~6% of a message."""
    k = min(k, len(logp))
    top = float(logp.max())
    for margin in (8.0, 16.0, 32.0):
        ids = np.flatnonzero(logp >= top - margin)
        if len(ids) >= k:
            break
    else:
        ids = np.arange(len(logp))
    values = logp[ids]
    if len(ids) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]  # the k-th largest value
        above = np.flatnonzero(values > kth)
        ties = np.flatnonzero(values == kth)[: k - len(above)]
        keep = np.concatenate([above, ties])
        ids, values = ids[keep], values[keep]
    return ids[np.lexsort((ids, -values))]


class FinetunedQuestion(dspy.Module):
    """Stage 1 by a fine-tuned small LM. `samples`: sampled candidates beside the greedy one (0: greedy only);
    `base`: the GGUF to train on (a loaded adapter names its own); `threads`: auto = the free cores (common/cpu.py)."""

    uses_lm = False  # no role LM: its own weights, run in process

    def __init__(self, max_words: int = 15, register: str = "clinician", samples: int = 8, temperature: float = 0.8,
                 coverage_weight: float = 3.0, opening_weight: float = 3.0, max_new_tokens: int = 40, threads: int = 2,
                 base: dict[str, Any] | None = None, embedder: Any = None, cache: bool = True) -> None:
        super().__init__()
        where = "program.question"
        if register not in ("auto", *REGISTERS):
            raise ConfigError(f"{where}.register must be one of {['auto', *REGISTERS]}, not {register!r}")
        # bounds: the candidates decode together, so samples and reply length size the model's cache
        self.max_words = number_in(f"{where}.max_words", max_words, 1, 200, integer=True)
        self.samples = number_in(f"{where}.samples", samples, 0, 63, integer=True)
        self.max_new_tokens = number_in(f"{where}.max_new_tokens", max_new_tokens, 4, 256, integer=True)
        self.coverage_weight = number_in(f"{where}.coverage_weight", coverage_weight, 0, 100)
        self.opening_weight = number_in(f"{where}.opening_weight", opening_weight, 0, 100)
        self.temperature = number_in(f"{where}.temperature", temperature, 0, 5, low_open=True)
        self.register = register
        self.threads = threads_setting(threads, f"{where}.threads")
        if not isinstance(cache, bool):
            raise ConfigError(f"{where}.cache must be true or false, not {cache!r}")
        self.cache = cache
        self.base = BaseModel(**(base or {}))
        self.embedder = embedder
        self.adapter = LoraAdapter()
        self.register_head = LogisticHead(REGISTER_FEATURE_SET, tuple(f"embedding_{i}" for i in range(384)),
                                          embedder.name if embedder is not None else None)

    # --- the model ------------------------------------------------------------------------------------------------
    def loaded(self) -> tuple[Any, Any]:
        """(llama.cpp model with the adapter merged in, its lock)."""
        if not self.adapter.fitted:
            raise LearnedStateError("program.question (finetuned): no adapter loaded; load a compiled program "
                                    "(program.compiled=PATH) or train one: task=compile optimizer=finetune")
        return merged_llama(self.model_base(), self.adapter.adapter_id, self.adapter.tensors, self.adapter.scale)

    def model_base(self) -> BaseModel:
        """The GGUF the adapter was trained on (its state says which), else the configured one (for training)."""
        recorded = self.adapter.base or {}
        if recorded.get("file") and not self.base.model_path:
            named = BaseModel(package=recorded.get("package"), file=recorded["file"])
            if self.base not in (BaseModel(), named):  # a base set for training must not pass silently at run time
                raise LearnedStateError(
                    f"program.question.base is {self.base.package}/{self.base.file}, but the loaded adapter was trained "
                    f"on {named.package}/{named.file}: a base is chosen by training (task=compile); load the program "
                    "compiled on it (program.compiled=PATH)")
            return named
        return self.base

    def chat_format(self, base: BaseModel | None = None) -> ChatFormat:
        """The turn markup of `base` (default: the loaded adapter's) by its GGUF's architecture."""
        return chat_format(gguf_architecture((base or self.model_base()).path()))

    def prepare(self, narrative: str) -> str:
        llm, _ = self.loaded()
        return fit_to_budget(normalise_message(narrative),
                             lambda t: len(llm.tokenize(t.encode("utf-8"), add_bos=False, special=False)),
                             self.adapter.max_input_tokens)

    def choose_register(self, message: str) -> str:
        if self.register != "auto":
            return self.register
        if not self.register_head.fitted or self.embedder is None:
            return "clinician"  # ArchEHR's own register when no head was fitted
        p = float(self.register_head.probabilities(self.embedder.encode_queries([message]))[0])
        return "clinician" if p >= float(self.register_head.selection.get("threshold", 0.5)) else "consumer"

    def candidates(self, message: str, register: str) -> list[tuple[str, float, bool]]:
        """(question, mean log-probability of its tokens, whole: it fit in `max_words` as written) for the greedy
        reply and `samples` sampled ones, best first. The candidates decode together, one batch per step; each stops
        at the end of its turn or once `reply_complete`."""
        llm, lock = self.loaded()
        instruction = self.adapter.instructions.get(register, INSTRUCTIONS[register])
        fmt = self.chat_format()
        prompt = build_prompt(instruction, message, fmt)
        parts = prompt_parts(llm, instruction, message, fmt)
        tokens = [token for part in parts for token in part]
        eos = llm.tokenize(fmt.end.encode("utf-8"), add_bos=False, special=True)[0]  # the end of the model's turn
        n_seq = 1 + self.samples
        # reproducible: the same message gets the same samples in every run, whatever else the batch holds
        seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
        rngs = [np.random.default_rng([seed, run]) for run in range(n_seq)]
        out: list[list[int]] = [[] for _ in range(n_seq)]
        text = [b"" for _ in range(n_seq)]
        total = [0.0] * n_seq
        with lock:
            decoder = batch_decoder(llm, n_seq, len(tokens) + n_seq * self.max_new_tokens + 64)
            # the instruction's frame (~a quarter of a prompt) is read once per process and restored for each message
            first = decoder.start(tokens, n_seq, threads_now(self.threads), prefix=len(parts[0]))
            logits = dict.fromkeys(range(n_seq), first)
            for step in range(self.max_new_tokens):
                chosen: dict[int, int] = {}
                for run, row in logits.items():
                    logp = row - row.max()
                    logp = logp - np.log(np.exp(logp).sum())
                    if run == 0:
                        token = int(logp.argmax())
                    else:  # temperature sampling among the 40 most probable tokens
                        top = top_tokens(logp, 40)
                        weights = np.exp((logp[top] - logp[top].max()) / self.temperature)
                        token = int(top[rngs[run].choice(len(top), p=weights / weights.sum())])
                    total[run] += float(logp[token])
                    out[run].append(token)
                    if token == eos:
                        continue
                    text[run] += llm.detokenize([token])
                    if not reply_complete(text[run].decode("utf-8", "replace"), self.max_words):
                        chosen[run] = token
                if not chosen or step + 1 == self.max_new_tokens:
                    break
                logits = decoder.step(len(tokens) + step, chosen)
        found: dict[str, tuple[float, bool]] = {}
        for run in range(n_seq):
            reply = text[run].decode("utf-8", "replace")
            question = finish_question(reply, self.max_words)
            score = total[run] / max(1, len(out[run]))
            if question:
                best, whole = found.get(question, (-1e9, False))
                found[question] = (max(best, score), whole or reply_fits(reply, self.max_words))
        return sorted(((q, s, whole) for q, (s, whole) in found.items()), key=lambda x: -x[1])

    def cached_candidates(self, message: str, register: str) -> list[tuple[str, float, bool]]:
        """`candidates`, kept in DSPy's cache keyed by everything that decides them (candidate_cache.py)."""
        if not self.cache:
            return self.candidates(message, register)
        request = {"model": candidate_cache.model_identity(self.model_base().path()),
                   "adapter": self.adapter.adapter_id,  # a digest of its tensors and scale
                   "instruction": self.adapter.instructions.get(register, INSTRUCTIONS[register]),
                   "message": message, "register": register, "samples": self.samples, "temperature": self.temperature,
                   "max_new_tokens": self.max_new_tokens, "max_words": self.max_words}
        return candidate_cache.cached(request, lambda: self.candidates(message, register))

    def ranked(self, candidates: list[tuple[str, float, bool]], message: str) -> list[dict[str, Any]]:
        """Every candidate with the rerank's parts, whether it could be picked (`eligible`) and if not why
        (`excluded`): the pick first, then the eligible ones by score, then the rest. A candidate cut at `max_words`
        (it ends mid-phrase) is picked only when none is whole."""
        stems = content_stems(message)
        prior = opening_penalties(self.adapter.fit.get("opening_prior") or {})
        scored: list[tuple[float, dict[str, Any]]] = []  # (unrounded score: the order, the row shown)
        for q, s, whole in candidates:
            cov, share = coverage(q, stems), float(prior.get(opening(q), 0.0))
            total = s + self.coverage_weight * cov - self.opening_weight * share
            excluded = ("empty" if not q else "control tokens" if has_control_tokens(q)
                        else "no word of the message" if cov <= 0 else None)
            scored.append((total, {"question": q, "log_prob": round(s, 4), "coverage": round(cov, 4),
                                   "opening_share": round(share, 4), "score": round(total, 4), "whole": bool(whole),
                                   "eligible": excluded is None, "excluded": excluded}))
        if any(r["eligible"] and r["whole"] for _, r in scored):  # a question cut at max_words only when every one is
            for _, r in scored:
                if r["eligible"] and not r["whole"]:
                    r["eligible"], r["excluded"] = False, f"cut at {self.max_words} words"
        scored.sort(key=lambda x: (not x[1]["eligible"], -x[0]))  # stable: ties keep the candidates' order
        return [r for _, r in scored]

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        narrative = patient_narrative or ""
        if not narrative.strip():
            marked = patient_question.strip()
            narrative = "" if marked.lower() in ("(none)", "none") else marked
        if not normalise_message(narrative):
            return dspy.Prediction(clinician_question="", register=None, fallback="empty message")
        message = self.prepare(narrative)
        register = self.choose_register(normalise_message(narrative))
        ranked = self.ranked(self.cached_candidates(message, register), message)
        if not ranked or not ranked[0]["eligible"]:
            rule = truncate_words(first_question_sentence(normalise_message(narrative)), self.max_words)
            return dspy.Prediction(clinician_question=rule, register=register, candidates=ranked,
                                   fallback="no candidate names anything the message says: its first question sentence")
        return dspy.Prediction(clinician_question=ranked[0]["question"], register=register, candidates=ranked,
                               fallback=None)

    # --- how optimizer=finetune trains this stage (the recipe: programs/archehr/question/finetune.py) ---------
    def training_prompt(self, register: str, message: str) -> str:
        return build_prompt(INSTRUCTIONS[register], message, self.chat_format(self.base))  # the base being trained

    def finetune_pairs(self, examples: list[dspy.Example]) -> list[tuple[str, str, str]]:
        return question_finetune.example_pairs(examples)

    def finetune_rows(self, tokenizer: Any, pairs: list[tuple[str, str, str]],
                      settings: Any) -> list[tuple[list[int], list[int]]]:
        return question_finetune.training_rows(self, tokenizer, pairs, settings)

    def finetune_summary(self, pairs: list[tuple[str, str, str]], settings: Any) -> dict[str, Any]:
        return question_finetune.summary(pairs, settings)

    def finetune_adopt(self, tensors: dict[str, tuple[np.ndarray, np.ndarray]], fit: dict[str, Any],
                       pairs: list[tuple[str, str, str]], settings: Any) -> None:
        question_finetune.adopt(self, tensors, fit, pairs, settings)

    def finetune_review(self, valset: list[dspy.Example], metric: Any) -> dict[str, Any]:
        return question_finetune.review_questions(self, valset, metric, self.max_words)
