"""`optimizer=finetune`: LoRA fine-tuning of a stage's small LM on CPU. The student's sub-module with a `LoraAdapter`
named `adapter` and a recipe (`finetune_pairs`, `_rows`, `_summary`, `_adopt`, `_review`) is trained on its recipe's
rows and returned in a copy: loss on the target tokens only, AdamW with linear warm-up and decay."""

from __future__ import annotations

import logging
import math
import random
import time
from typing import Any

import dspy
import numpy as np

from common.errors import ConfigError, number_in
from common.parameters import LORA_MAX_INPUT_TOKENS, LORA_MAX_RANK, LORA_MAX_SCALE, LoraAdapter

log = logging.getLogger(__name__)


def finetunable(program: dspy.Module) -> Any:
    """The program's stage that holds a LoraAdapter `adapter` and a fine-tuning recipe."""
    for _, module in [("self", program), *program.named_sub_modules()]:
        if isinstance(getattr(module, "adapter", None), LoraAdapter) and callable(getattr(module, "finetune_rows", None)):
            return module
    raise ConfigError("optimizer=finetune: the program has no fine-tunable stage (a LoraAdapter `adapter` with a "
                      "recipe: e.g. program/archehr/question=finetuned)")


class LoraFinetune(dspy.teleprompt.Teleprompter):
    """LoRA on the top `layers` decoder layers (q/k/v/o/gate/up/down), rank `rank`, alpha `alpha`."""

    def __init__(self, metric: Any = None, rank: int = 16, alpha: float = 32.0, layers: int = 15, epochs: float = 1.0,
                 learning_rate: float = 4e-4, batch_size: int = 8, warmup_steps: int = 10,
                 max_input_tokens: int = 128, repeat_rare: int = 5, dropout: float = 0.05, seed: int = 0,
                 threads: int = 2, max_opening_share: float = 0.06) -> None:
        super().__init__()
        # the highest rank, scale and input a compiled program may hold (common/parameters.py)
        for name, value, low, high in (("rank", rank, 1, LORA_MAX_RANK), ("layers", layers, 1, None),
                                       ("batch_size", batch_size, 1, None), ("warmup_steps", warmup_steps, 0, None),
                                       ("max_input_tokens", max_input_tokens, 16, LORA_MAX_INPUT_TOKENS),
                                       ("repeat_rare", repeat_rare, 1, None), ("threads", threads, 1, None)):
            number_in(f"optimizer.teleprompter.{name}", value, low, high, integer=True)
        for name, value in (("epochs", epochs), ("learning_rate", learning_rate)):
            number_in(f"optimizer.teleprompter.{name}", value, 0, low_open=True)
        number_in("optimizer.teleprompter.alpha", alpha, 0, LORA_MAX_SCALE * rank, low_open=True,
                  note=f"alpha / rank at most {LORA_MAX_SCALE:g}")
        number_in("optimizer.teleprompter.max_opening_share", max_opening_share, 0, 1, low_open=True)
        number_in("optimizer.teleprompter.dropout", dropout, 0, 1, high_open=True)
        self.metric = metric
        self.rank, self.alpha, self.layers, self.epochs = rank, float(alpha), layers, float(epochs)
        self.learning_rate, self.batch_size, self.warmup_steps = float(learning_rate), batch_size, warmup_steps
        self.max_input_tokens, self.repeat_rare, self.dropout, self.seed = max_input_tokens, repeat_rare, dropout, seed
        self.threads, self.max_opening_share = threads, float(max_opening_share)

    def preflight(self, program: dspy.Module) -> None:
        """The base model to train on exists (checked before any scoring)."""
        finetunable(program).base.path()

    def compile(self, student: dspy.Module, *, trainset: list[dspy.Example], valset: list[dspy.Example] | None = None,
                **_: Any) -> dspy.Module:
        program = student.deepcopy()
        stage = finetunable(program)
        pairs = stage.finetune_pairs(trainset)
        if not pairs:
            raise ConfigError("optimizer=finetune: no training example has a reference (data.train)")
        tensors, fit = self.train(stage, pairs)
        stage.finetune_adopt(tensors, fit, pairs, self)
        return program

    def review(self, program: dspy.Module, valset: list[dspy.Example], metric: Any) -> dict[str, Any]:
        return finetunable(program).finetune_review(valset, metric)

    # --- training ------------------------------------------------------------------------------------------------
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
        rows = stage.finetune_rows(tokenizer, pairs, self)
        steps = max(1, math.ceil(len(rows) * self.epochs / self.batch_size))
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=self.learning_rate,
                                      weight_decay=0.0)
        warmup = min(self.warmup_steps, steps - 1)

        def rate(step: int) -> float:  # linear warm-up, then linear decay to 0 at the last step
            return (step + 1) / (warmup + 1) if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup))

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
        # padding (after each row's target, masked out and never a label): the base's own pad or end token
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
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
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
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
        fit = {**stage.finetune_summary(pairs, self), "rows": len(rows), "steps": steps,
               "seconds": round(time.perf_counter() - start, 1),
               "loss_first": round(float(np.mean(losses[:10])), 4), "loss_last": round(float(np.mean(losses[-10:])), 4),
               "layers": top, "learning_rate": self.learning_rate, "batch_size": self.batch_size,
               "epochs": self.epochs, "seed": self.seed}
        return tensors, fit


def target_loss(model: Any, ids: Any, mask: Any, labels: Any) -> Any:
    """Mean cross-entropy of the target tokens, the vocabulary projection computed at those positions only (at every
    prompt position it is most of a step's cost and carries no loss)."""
    import torch

    inner = model.get_base_model()
    hidden = inner.model(input_ids=ids, attention_mask=mask).last_hidden_state
    shifted = labels[:, 1:]
    where = shifted != -100
    logits = inner.lm_head(hidden[:, :-1][where])
    return torch.nn.functional.cross_entropy(logits, shifted[where])
