"""The compile's guards: a proposed instruction is adopted only when it is not degenerate (a small LM scored on a few
examples can win by pasting a training input into it, repeating it, or growing it without bound; each check is a plain
text statistic), and the compiled program only when validation says so (`adoption_refusal`)."""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dspy

WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class GuardLimits:
    """`optimizer.guard.*` (conf/optimizer/guard/default.yaml documents each limit)."""

    enabled: bool
    max_growth: float
    max_words: int
    ngram: int
    min_distinct_ngrams: float
    min_ngrams_to_judge: int
    min_compression_ratio: float
    min_chars_to_compress: int
    max_copied_words: int
    adopt_if: str = "not_worse"   # whether the compiled program is adopted at all: see `adoption_refusal`

    @classmethod
    def from_config(cls, guard: Mapping[str, Any] | None) -> GuardLimits:
        """Every limit from the config (no defaults here); a missing or unknown key is one error."""
        from common.errors import ConfigError

        values = dict(guard or {})
        names = {f.name for f in dataclasses.fields(cls)}
        if set(values) != names:
            raise ConfigError(f"optimizer.guard: missing {sorted(names - set(values))}, unknown "
                              f"{sorted(set(values) - names)}; the keys are {sorted(names)} "
                              "(conf/optimizer/guard/default.yaml)")
        if values["adopt_if"] not in ADOPT_IF:
            raise ConfigError(f"optimizer.guard.adopt_if must be one of {list(ADOPT_IF)}, not {values['adopt_if']!r}")
        return cls(**values)


ADOPT_IF = ("improves", "not_worse", "always")


def adoption_refusal(adopt_if: str, before: float, after: float) -> str | None:
    """Why a compiled program is not adopted (its validation score against the one before), or None. No score before
    (a learned stage compiled from scratch: NaN) is nothing to compare: the learned-weights review judges it."""
    if adopt_if == "always" or math.isnan(before):
        return None
    if math.isnan(after):
        return f"its validation score could not be taken (before: {before:.4f})"
    scores = f"({before:.4f} before, {after:.4f} after; optimizer.guard.adopt_if={adopt_if})"
    if adopt_if == "improves" and not after > before:
        return f"the validation score did not improve {scores}"
    if adopt_if == "not_worse" and after < before:
        return f"the validation score fell {scores}"
    return None


@dataclass(frozen=True)
class Verdict:
    """Whether a proposed instruction is adopted, and why not when it is not."""

    adopted: bool
    reasons: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if not self.adopted:
            return "rejected: " + "; ".join(self.reasons)
        return "unchanged" if self.reasons == ("unchanged",) else "adopted" + "".join(f" ({r})" for r in self.reasons)


def words(text: str) -> list[str]:
    """Lower-cased word tokens: punctuation and spacing changes do not hide a repeat or a copy."""
    return WORD.findall(text.lower())


def shingles(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def repetition_reasons(text: str, limits: GuardLimits) -> list[str]:
    """A text that says the same thing over and over: few distinct n-grams, or a compressed size far below prose."""
    reasons = []
    grams = shingles(words(text), limits.ngram)
    if len(grams) >= limits.min_ngrams_to_judge:
        distinct = len(set(grams)) / len(grams)
        if distinct < limits.min_distinct_ngrams:
            reasons.append(f"repeats itself: only {distinct:.0%} of its {limits.ngram}-word sequences are distinct "
                           f"(limit {limits.min_distinct_ngrams:.0%})")
    raw = text.encode()
    if len(raw) >= limits.min_chars_to_compress:
        ratio = len(zlib.compress(raw, 9)) / len(raw)
        if ratio < limits.min_compression_ratio:
            reasons.append(f"repeats itself: it compresses to {ratio:.0%} of its size "
                           f"(prose stays above {limits.min_compression_ratio:.0%})")
    return reasons


def copy_reason(text: str, original: str, inputs: Iterable[tuple[str, str]], limits: GuardLimits) -> str | None:
    """The longest verbatim run of words shared with one input text (word runs of the original instruction do not
    count), when it is longer than `max_copied_words`. `inputs` are (label, text) pairs, e.g. ('case 3', narrative)."""
    n = limits.max_copied_words + 1
    tokens = words(text)
    if len(tokens) < n:
        return None
    own = set(shingles(words(original), n))
    proposed = shingles(tokens, n)
    wanted = set(proposed) - own
    found: dict[tuple[str, ...], str] = {}
    for label, source in inputs:
        for gram in shingles(words(source), n):
            if gram in wanted and gram not in found:
                found[gram] = label
    if not found:
        return None
    # the longest run of consecutive matching n-grams from one source: a run of k matches is k + n - 1 words
    best_len, best_label, run, run_label = 0, "", 0, ""
    for gram in proposed:
        label = found.get(gram)
        run = run + 1 if label is not None and label == run_label else (1 if label is not None else 0)
        run_label = label or ""
        if run and run + n - 1 > best_len:
            best_len, best_label = run + n - 1, run_label
    return f"copies an input: {best_len} consecutive words of {best_label} (at most {n - 1} allowed)"


def growth_reason(text: str, original: str, limits: GuardLimits) -> str | None:
    new, old = len(words(text)), max(len(words(original)), 1)
    if new > limits.max_growth * old and new > limits.max_words:
        return (f"grows too long: {new} words from {old} (limits: {limits.max_growth:g}x the original and "
                f"{limits.max_words} words)")
    return None


def judge(proposed: str, original: str, inputs: Iterable[tuple[str, str]], limits: GuardLimits) -> Verdict:
    """The verdict on one proposed instruction; an unchanged or guard-disabled one is adopted as it is."""
    if proposed == original:
        return Verdict(True, ("unchanged",))
    if not limits.enabled:
        return Verdict(True, ("guard off",))
    if not proposed.strip():
        return Verdict(False, ("empty",))
    reasons = repetition_reasons(proposed, limits)
    copied = copy_reason(proposed, original, inputs, limits)
    grown = growth_reason(proposed, original, limits)
    reasons += [r for r in (copied, grown) if r]
    return Verdict(not reasons, tuple(reasons))


def input_texts(value: Any, depth: int = 0) -> Iterable[str]:
    """Every string inside an example's input (a str, or a dataclass such as Case or Note, lists, dicts)."""
    if depth > 4 or value is None:
        return
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from input_texts(getattr(value, f.name), depth + 1)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from input_texts(v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from input_texts(v, depth + 1)


def truncate(text: str, limit: int = 400) -> str:
    """A long text shown in a report: its start, and how much was left out."""
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


@dataclass(frozen=True)
class PredictorState:
    instruction: str
    demos: list[dict[str, str]]


@dataclass
class PredictorReview:
    """One predictor before and after a compile, with the guard's verdict on its instruction."""

    name: str
    before: PredictorState
    proposed: PredictorState
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        after = self.proposed.instruction if self.verdict.adopted else self.before.instruction
        return {"predictor": self.name, "verdict": self.verdict.label, "adopted": self.verdict.adopted,
                "reasons": list(self.verdict.reasons), "instruction_before": self.before.instruction,
                "instruction_proposed": self.proposed.instruction, "instruction_after": after,
                "demos_before": self.before.demos, "demos_after": self.proposed.demos}


def item_label(value: Any, item_id: Callable[[Any], str] | None) -> str | None:
    """'case 901' for an input object the program can name (a Case, a Note), else None."""
    if item_id is None or isinstance(value, str | int | float | list | tuple | dict) or value is None:
        return None
    try:
        found = item_id(value)
    except (AttributeError, KeyError, TypeError):
        return None
    return None if found is None else f"{type(value).__name__.lower()} {found}"


def _state(predictor: Any, item_id: Callable[[Any], str] | None) -> PredictorState:
    """The instruction, and each demo as short text per field (a whole case object shown by its id)."""
    demos = []
    for demo in predictor.demos:
        values = demo.toDict() if hasattr(demo, "toDict") else dict(demo)
        demos.append({k: item_label(v, item_id) or truncate(str(v), 160) for k, v in values.items()
                      if not k.startswith("dspy_") and k != "augmented"})
    return PredictorState(predictor.signature.instructions, demos)


def snapshot(program: dspy.Module, item_id: Callable[[Any], str] | None = None) -> dict[str, PredictorState]:
    """Every predictor's state, taken before the optimizer may change it in place."""
    return {name: _state(p, item_id) for name, p in program.named_predictors()}


def example_inputs(examples: list[dspy.Example], item_id: Callable[[Any], str] | None = None) -> list[tuple[str, str]]:
    """(label, text) for every string inside every example's inputs: what a proposed instruction must not copy."""
    out = []
    for i, ex in enumerate(examples):
        values = [ex[k] for k in ex.inputs().keys()]
        label = next((lab for v in values if (lab := item_label(v, item_id))), f"example {i + 1}")
        out += [(f"{label}'s input", text) for v in values for text in input_texts(v)]
    return out


def guard_instructions(compiled: dspy.Module, before: dict[str, PredictorState], inputs: list[tuple[str, str]],
                       limits: GuardLimits, item_id: Callable[[Any], str] | None = None) -> list[PredictorReview]:
    """Judge each predictor's instruction in `compiled` against its original; put a rejected one back, so the
    state that is saved, scored and served never carries it."""
    reviews = []
    for name, pred in compiled.named_predictors():
        proposed = _state(pred, item_id)
        original = before.get(name, PredictorState(proposed.instruction, []))
        verdict = judge(proposed.instruction, original.instruction, inputs, limits)
        if not verdict.adopted:
            pred.signature = pred.signature.with_instructions(original.instruction)
        reviews.append(PredictorReview(name, original, proposed, verdict))
    return reviews
