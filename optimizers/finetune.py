"""`optimizer=finetune`: LoRA fine-tuning of the question stage's small LM on CPU (DSPy's BootstrapFinetune role:
the compile optimizes weights, not prompts), and the register head beside it.

`compile(student, trainset=..., valset=...)` like every DSPy teleprompter: the student is the ArchEHR program; its
module with a `LoraAdapter` (`program.question`, the finetuned implementation) is trained on the (message, register,
reference question) of `trainset` and returned in a copy of the student; `valset` is only scored by the caller
(runners/compile.py: before/after, the guard). Training: loss on the target tokens only (the prompt and padding are
masked), AdamW with linear warm-up then linear decay, one pass by default; inputs cut to `max_input_tokens` the way
inference cuts them (`question_text.fit_to_budget`). Examples of a rare register are repeated (`repeat_rare`) so
the 20 ArchEHR pairs are not drowned by 1,000 consumer questions.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import time
from collections import Counter
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError
from common.parameters import LORA_MAX_INPUT_TOKENS, LORA_MAX_RANK, LORA_MAX_SCALE, LoraAdapter

log = logging.getLogger(__name__)
LAYER_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj")


def question_module(program: dspy.Module) -> tuple[str, Any]:
    """(name, module) of the program's stage that holds a LoraAdapter."""
    for name, module in [("self", program), *program.named_sub_modules()]:
        if isinstance(getattr(module, "adapter", None), LoraAdapter):
            return name, module
    raise ConfigError("optimizer=finetune: the program has no fine-tunable stage; choose "
                      "program/archehr/question=finetuned")


def example_pairs(examples: list[dspy.Example]) -> list[tuple[str, str, str]]:
    """(message, register, reference question) of every example that has a reference."""
    pairs = []
    for ex in examples:
        case = ex.case
        ref = getattr(ex, "clinician_question", None) or case.clinician_question
        if ref and case.patient_narrative.strip():
            pairs.append((case.patient_narrative, getattr(ex, "register", None) or "clinician", ref))
    return pairs


def pairs_hash(pairs: list[tuple[str, str, str]]) -> str:
    return hashlib.sha256(repr(sorted(pairs)).encode()).hexdigest()[:16]


class QuestionFinetune(dspy.teleprompt.Teleprompter):
    """LoRA on the top `layers` decoder layers (q/k/v/o/gate/up/down), rank `rank`, alpha `alpha`."""

    def __init__(self, metric: Any = None, rank: int = 16, alpha: float = 32.0, layers: int = 15, epochs: float = 1.0,
                 learning_rate: float = 4e-4, batch_size: int = 8, warmup_steps: int = 10,
                 max_input_tokens: int = 128, repeat_rare: int = 5, dropout: float = 0.05, seed: int = 0,
                 threads: int = 2, max_opening_share: float = 0.06) -> None:
        super().__init__()
        for name, value, low in (("rank", rank, 1), ("layers", layers, 1), ("batch_size", batch_size, 1),
                                 ("warmup_steps", warmup_steps, 0), ("max_input_tokens", max_input_tokens, 16),
                                 ("repeat_rare", repeat_rare, 1), ("threads", threads, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"optimizer.teleprompter.{name} must be an integer >= {low}, not {value!r}")
        for name, value in (("alpha", alpha), ("epochs", epochs), ("learning_rate", learning_rate)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
                raise ConfigError(f"optimizer.teleprompter.{name} must be a positive number, not {value!r}")
        if rank > LORA_MAX_RANK or alpha / rank > LORA_MAX_SCALE or max_input_tokens > LORA_MAX_INPUT_TOKENS:
            raise ConfigError(f"optimizer.teleprompter: rank at most {LORA_MAX_RANK}, alpha / rank at most "
                              f"{LORA_MAX_SCALE:g} and max_input_tokens at most {LORA_MAX_INPUT_TOKENS} (what a "
                              "compiled program may hold)")
        if isinstance(max_opening_share, bool) or not isinstance(max_opening_share, (int, float)) or not (
                0 < max_opening_share <= 1):
            raise ConfigError(f"optimizer.teleprompter.max_opening_share must be in (0, 1], not {max_opening_share!r}")
        if not 0 <= dropout < 1:
            raise ConfigError(f"optimizer.teleprompter.dropout must be in [0, 1), not {dropout!r}")
        self.metric = metric
        self.rank, self.alpha, self.layers, self.epochs = rank, float(alpha), layers, float(epochs)
        self.learning_rate, self.batch_size, self.warmup_steps = float(learning_rate), batch_size, warmup_steps
        self.max_input_tokens, self.repeat_rare, self.dropout, self.seed = max_input_tokens, repeat_rare, dropout, seed
        self.threads, self.max_opening_share = threads, float(max_opening_share)

    def compile(self, student: dspy.Module, *, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None,
                **_: Any) -> dspy.Module:
        program = student.deepcopy()
        _, stage = question_module(program)
        pairs = example_pairs(trainset)
        if not pairs:
            raise ConfigError("optimizer=finetune: no training example has a reference question (data.train)")
        tensors, fit = self.train(stage, pairs)
        fit["opening_prior"] = opening_prior(pairs)
        from programs.archehr.question_model import INSTRUCTIONS

        stage.adapter.set(tensors, self.rank, self.alpha, {"file": stage.base.name(), "package": stage.base.package},
                          dict(INSTRUCTIONS), self.max_input_tokens, fit)
        fit_register_head(stage, pairs)
        return program

    def review(self, program: dspy.Module, valset: list[dspy.Example], metric: Any) -> dict[str, Any]:
        _, stage = question_module(program)
        return review_questions(stage, valset, metric, stage.max_words)

    # --- training ------------------------------------------------------------------------------------------------
    def rows(self, tokenizer: Any, pairs: list[tuple[str, str, str]]) -> list[tuple[list[int], list[int]]]:
        from programs.archehr.question_model import INSTRUCTIONS, build_prompt
        from programs.archehr.question_text import fit_to_budget, normalise_message

        def count(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False)["input_ids"])

        pairs = self.balanced(pairs)
        counts = Counter(register for _, register, _ in pairs)
        most = max(counts.values())
        rows = []
        for message, register, target in pairs:
            prompt = build_prompt(INSTRUCTIONS[register], fit_to_budget(normalise_message(message), count,
                                                                         self.max_input_tokens))
            p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            t = tokenizer(target.strip() + "<|im_end|>", add_special_tokens=False)["input_ids"][:48]
            times = self.repeat_rare if counts[register] * 4 <= most else 1
            rows.extend([(p, t)] * times)
        return rows

    def balanced(self, pairs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """At most `max_opening_share` of a register's targets per 4-word opening (a random subset of the rest is
        dropped): a template that a fifth of the references share ("What are the treatments for ...") otherwise
        becomes most of what the small model writes, whatever the message asks."""
        from programs.archehr.question_text import opening

        rng = random.Random(self.seed)
        kept: list[tuple[str, str, str]] = []
        for register in sorted({r for _, r, _ in pairs}):
            mine = [p for p in pairs if p[1] == register]
            cap = max(1, math.ceil(self.max_opening_share * len(mine)))
            groups: dict[str, list[tuple[str, str, str]]] = {}
            for p in mine:
                groups.setdefault(opening(p[2]), []).append(p)
            for group in groups.values():
                kept += group if len(group) <= cap else rng.sample(group, cap)
        return kept

    def train(self, stage: Any, pairs: list[tuple[str, str, str]]) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                                                               dict[str, Any]]:
        import torch
        from peft import LoraConfig, get_peft_model

        from lms.gguf_causal_lm import load_base

        torch.manual_seed(self.seed)
        rng = random.Random(self.seed)
        tokenizer, model = load_base(stage.base, self.threads)
        n_layers = model.config.num_hidden_layers
        top = list(range(max(0, n_layers - self.layers), n_layers))
        config = LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout, bias="none",
                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                            layers_to_transform=top, task_type="CAUSAL_LM")
        model = get_peft_model(model, config)
        model.train()
        rows = self.rows(tokenizer, pairs)
        steps = max(1, math.ceil(len(rows) * self.epochs / self.batch_size))
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=self.learning_rate,
                                      weight_decay=0.0)
        warmup = min(self.warmup_steps, steps - 1)

        def rate(step: int) -> float:  # linear warm-up, then linear decay to 0 at the last step
            return (step + 1) / (warmup + 1) if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup))

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
        eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        # batches of similar lengths (less padding), in a shuffled order, a new shuffle each pass
        by_length = sorted(range(len(rows)), key=lambda i: (len(rows[i][0]) + len(rows[i][1]), rng.random()))
        chunks = [by_length[i: i + self.batch_size] for i in range(0, len(by_length), self.batch_size)]
        order: list[list[int]] = []
        losses: list[float] = []
        start = time.perf_counter()
        for step in range(steps):
            if not order:
                order = list(chunks)
                rng.shuffle(order)
            batch = [rows[i] for i in order.pop()]
            width = max(len(p) + len(t) for p, t in batch)
            ids = torch.full((len(batch), width), eos, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, (p, t) in enumerate(batch):
                seq = p + t
                ids[r, : len(seq)] = torch.tensor(seq)
                labels[r, len(p): len(seq)] = torch.tensor(t)
                mask[r, : len(seq)] = 1
            loss = target_loss(model, ids, mask, labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
            if step % 20 == 0 or step == steps - 1:
                log.info("finetune step %d/%d loss %.3f (%.0f s)", step + 1, steps, np.mean(losses[-20:]),
                         time.perf_counter() - start)
        tensors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name, module in model.named_modules():
            if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
                clean = name.replace("base_model.model.", "", 1)
                tensors[clean] = (module.lora_A["default"].weight.detach().numpy().copy(),
                                  module.lora_B["default"].weight.detach().numpy().copy())
        fit = {"pairs": len(pairs), "kept_after_opening_cap": len(self.balanced(pairs)), "rows": len(rows),
               "registers": dict(Counter(r for _, r, _ in pairs)),
               "data_hash": pairs_hash(pairs), "steps": steps, "seconds": round(time.perf_counter() - start, 1),
               "loss_first": round(float(np.mean(losses[:10])), 4), "loss_last": round(float(np.mean(losses[-10:])), 4),
               "layers": top, "learning_rate": self.learning_rate, "batch_size": self.batch_size,
               "epochs": self.epochs, "seed": self.seed}
        return tensors, fit


def opening_prior(pairs: list[tuple[str, str, str]], top: int = 40) -> dict[str, dict[str, float]]:
    """Per register, the share of the training references that open with each of the `top` commonest 4-word
    openings (the stage penalises a candidate by it: `opening_weight`)."""
    from programs.archehr.question_text import opening

    prior: dict[str, dict[str, float]] = {}
    for register in sorted({r for _, r, _ in pairs}):
        targets = [t for _, r, t in pairs if r == register]
        counts = Counter(opening(t) for t in targets)
        prior[register] = {k: round(n / len(targets), 4) for k, n in counts.most_common(top)}
    return prior


def target_loss(model: Any, ids: Any, mask: Any, labels: Any) -> Any:
    """Mean cross-entropy of the target tokens, the vocabulary projection computed at those positions only (the
    49k-word projection of every prompt position is most of a step's cost and carries no loss)."""
    import torch

    inner = model.get_base_model()
    hidden = inner.model(input_ids=ids, attention_mask=mask).last_hidden_state
    shifted = labels[:, 1:]
    where = shifted != -100
    logits = inner.lm_head(hidden[:, :-1][where])
    return torch.nn.functional.cross_entropy(logits, shifted[where])


def fit_register_head(stage: Any, pairs: list[tuple[str, str, str]]) -> None:
    """The register head: logistic regression on the message embeddings, P(clinician); classes weighted equally."""
    from common.logistic_fit import fit_scorer
    from programs.archehr.question_model import register_matrix

    if stage.embedder is None or len({r for _, r, _ in pairs}) < 2:
        stage.register_head.coef = None  # one register only: the stage's register setting decides
        return
    x = register_matrix(stage.embedder, [m for m, _, _ in pairs])
    y = np.array([r == "clinician" for _, r, _ in pairs], dtype=int)
    head = fit_scorer(x, y, stage.register_head.features, 0.1, stage.register_head.feature_set, "balanced")
    accuracy = float(((head.probabilities(x) >= 0.5) == y).mean())
    stage.register_head.set(head.mean, head.scale, head.coef, head.intercept, {"threshold": 0.5},
                            {"examples": len(y), "clinician": int(y.sum()), "train_accuracy": round(accuracy, 4)})


def review_questions(stage: Any, valset: list[dspy.Example], metric: Any, max_words: int = 15) -> dict[str, Any]:
    """The question stage on the validation examples against the trivial baselines: refused when it scores below
    the best of them, or when its own best candidate is a placeholder (shares no content word with the message) on
    more than 5% of the messages, or when one 4-word opening covers more than 30% of its questions."""
    from programs.archehr.question_text import BASELINES, normalise_message, opening
    from programs.archehr.text import truncate_words

    examples = [ex for ex in valset if (getattr(ex, "clinician_question", None) or ex.case.clinician_question)]
    if not examples:
        return {"lines": ["no validation example has a reference question: not reviewed"], "refused": [],
                "scores": {}}
    outputs = [stage(ex.case.patient_narrative, " ".join(ex.case.patient_question_phrases)) for ex in examples]
    model_score = float(np.mean([metric(ex, out) for ex, out in zip(examples, outputs, strict=True)]))
    baselines = {}
    for name, fn in BASELINES.items():
        preds = [dspy.Prediction(clinician_question=truncate_words(fn(normalise_message(ex.case.patient_narrative)),
                                                                   max_words)) for ex in examples]
        baselines[name] = float(np.mean([metric(ex, p) for ex, p in zip(examples, preds, strict=True)]))
    best_name = max(baselines, key=baselines.get)
    fallbacks = sum(1 for out in outputs if out.get("fallback"))
    openings = Counter(opening(out.clinician_question) for out in outputs if out.clinician_question)
    top, top_n = openings.most_common(1)[0] if openings else ("", 0)
    share = top_n / len(outputs)
    refused = []
    if model_score < baselines[best_name]:
        refused.append(f"{model_score:.4f} on validation is below the baseline '{best_name}' ({baselines[best_name]:.4f})")
    if fallbacks > 0.05 * len(outputs):
        refused.append(f"{fallbacks} of {len(outputs)} questions were placeholders (no word of the message)")
    if share > 0.30 and top_n > 1:  # one question of a tiny set is no template
        refused.append(f"the opening '{top}' starts {share:.0%} of the questions (a collapsed template)")
    lines = [f"question stage on {len(examples)} validation messages: {model_score:.4f}"]
    lines += [f"baseline '{name}': {value:.4f}" for name, value in baselines.items()]
    lines += [f"placeholders replaced by the fallback: {fallbacks}", f"most common opening: '{top}' ({share:.0%})"]
    return {"lines": lines, "refused": refused, "scores": {"model": model_score, **baselines},
            "fallbacks": fallbacks, "top_opening": [top, round(share, 4)]}
