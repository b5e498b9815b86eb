"""How `optimizer=finetune` trains the question stage (the stage's `finetune_*` methods; the loop is in
optimizers/finetune.py): examples, prompts and targets, what is kept with the adapter, the review against the trivial
baselines."""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from typing import Any

import dspy
import numpy as np

from common.logistic_fit import fit_scorer
from programs.archehr.question.text import BASELINES, fit_to_budget, normalise_message, opening
from programs.archehr.text import truncate_words

# the prompts the adapter is trained with (and kept in its state)
INSTRUCTIONS = {
    "consumer": "Rewrite the health question below as one short question (at most 15 words) that keeps what the "
                "writer asks.",
    "clinician": "Rewrite the patient's message below as one short clinician question (at most 15 words) about the "
                 "patient's care, in the third person.",
}


def example_pairs(examples: list[dspy.Example]) -> list[tuple[str, str, str]]:
    """(message, register, reference question) of every example that has a reference."""
    pairs = []
    for ex in examples:
        case = ex.case
        ref = getattr(ex, "clinician_question", None) or case.clinician_question
        if ref and case.patient_narrative.strip():
            pairs.append((case.patient_narrative, getattr(ex, "register", None) or "clinician", ref))
    return pairs


def balanced(pairs: list[tuple[str, str, str]], max_opening_share: float, seed: int) -> list[tuple[str, str, str]]:
    """At most `max_opening_share` of a register's targets per 4-word opening (a random subset is kept): a template a
    fifth of the references share otherwise becomes most of what the small model writes."""
    rng = random.Random(seed)
    kept: list[tuple[str, str, str]] = []
    for register in sorted({r for _, r, _ in pairs}):
        mine = [p for p in pairs if p[1] == register]
        cap = max(1, math.ceil(max_opening_share * len(mine)))
        groups: dict[str, list[tuple[str, str, str]]] = {}
        for p in mine:
            groups.setdefault(opening(p[2]), []).append(p)
        for group in groups.values():
            kept += group if len(group) <= cap else rng.sample(group, cap)
    return kept


def training_rows(stage: Any, tokenizer: Any, pairs: list[tuple[str, str, str]],
                  settings: Any) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, target ids) rows, each message cut as inference cuts it; a rare register's repeated
    `settings.repeat_rare` times."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    pairs = balanced(pairs, settings.max_opening_share, settings.seed)
    counts = Counter(register for _, register, _ in pairs)
    most = max(counts.values())
    rows = []
    end = stage.chat_format(stage.base).end  # the model being trained learns to end its turn after the question
    for message, register, target in pairs:
        prompt = stage.training_prompt(register, fit_to_budget(normalise_message(message), count,
                                                                 settings.max_input_tokens))
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        t = tokenizer(target.strip() + end, add_special_tokens=False)["input_ids"][:48]
        times = settings.repeat_rare if counts[register] * 4 <= most else 1
        rows.extend([(p, t)] * times)
    return rows


def opening_prior(pairs: list[tuple[str, str, str]], top: int = 40) -> dict[str, dict[str, float]]:
    """Per register, the share of the training references opening with each of the `top` commonest 4-word openings."""
    prior: dict[str, dict[str, float]] = {}
    for register in sorted({r for _, r, _ in pairs}):
        targets = [t for _, r, t in pairs if r == register]
        counts = Counter(opening(t) for t in targets)
        prior[register] = {k: round(n / len(targets), 4) for k, n in counts.most_common(top)}
    return prior


def fit_register_head(stage: Any, pairs: list[tuple[str, str, str]]) -> None:
    """The register head: logistic regression on the message embeddings, P(clinician); classes weighted equally."""
    if stage.embedder is None or len({r for _, r, _ in pairs}) < 2:
        stage.register_head.coef = None  # one register only: the stage's register setting decides
        return
    x = stage.embedder.encode_queries([normalise_message(m) for m, _, _ in pairs])
    y = np.array([r == "clinician" for _, r, _ in pairs], dtype=int)
    head = fit_scorer(x, y, stage.register_head.features, 0.1, stage.register_head.feature_set, "balanced")
    accuracy = float(((head.probabilities(x) >= 0.5) == y).mean())
    stage.register_head.set(head.mean, head.scale, head.coef, head.intercept, {"threshold": 0.5},
                            {"examples": len(y), "clinician": int(y.sum()), "train_accuracy": round(accuracy, 4)})


def summary(pairs: list[tuple[str, str, str]], settings: Any) -> dict[str, Any]:
    """What the fit record says about the data (beside the training loop's own numbers)."""
    return {"pairs": len(pairs), "kept_after_opening_cap": len(balanced(pairs, settings.max_opening_share, settings.seed)),
            "registers": dict(Counter(r for _, r, _ in pairs)),
            "data_hash": hashlib.sha256(repr(sorted(pairs)).encode()).hexdigest()[:16]}


def adopt(stage: Any, tensors: dict[str, tuple[np.ndarray, np.ndarray]], fit: dict[str, Any],
          pairs: list[tuple[str, str, str]], settings: Any) -> None:
    """The trained adapter into the stage, with its prompts, the opening prior and the register head."""
    fit["opening_prior"] = opening_prior(pairs)
    stage.adapter.set(tensors, settings.rank, settings.alpha, {"file": stage.base.name(), "package": stage.base.package},
                      dict(INSTRUCTIONS), settings.max_input_tokens, fit)
    fit_register_head(stage, pairs)


def review_questions(stage: Any, valset: list[dspy.Example], metric: Any, max_words: int = 15) -> dict[str, Any]:
    """The question stage on the validation examples: refused when it scores below the best trivial baseline, falls
    back on more than 5% of the messages, or one 4-word opening starts more than 30% of its questions."""
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
