"""Each predictor before and after a compile: its instruction (with the guard's verdict) and its demos.

The guard runs on the optimizer's result: a rejected instruction is put back to the original on the compiled program
itself, so the state that is saved, scored and served never carries it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dspy

from optimizers.instruction_guard import GuardLimits, Verdict, input_texts, judge, truncate


@dataclass(frozen=True)
class PredictorState:
    instruction: str
    demos: list[dict[str, str]]


@dataclass
class PredictorReview:
    name: str
    before: PredictorState
    proposed: PredictorState
    verdict: Verdict

    @property
    def instruction_after(self) -> str:
        return self.proposed.instruction if self.verdict.adopted else self.before.instruction

    def to_json(self) -> dict[str, Any]:
        return {"predictor": self.name, "verdict": self.verdict.label, "adopted": self.verdict.adopted,
                "reasons": list(self.verdict.reasons), "instruction_before": self.before.instruction,
                "instruction_proposed": self.proposed.instruction, "instruction_after": self.instruction_after,
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


def demo_fields(demo: Any, item_id: Callable[[Any], str] | None = None, limit: int = 160) -> dict[str, str]:
    """A demo as short text per field (a whole case object is shown by its id)."""
    values = demo.toDict() if hasattr(demo, "toDict") else dict(demo)
    return {k: item_label(v, item_id) or truncate(str(v), limit) for k, v in values.items()
            if not k.startswith("dspy_") and k != "augmented"}


def snapshot(program: dspy.Module, item_id: Callable[[Any], str] | None = None) -> dict[str, PredictorState]:
    """Instructions and demos of every predictor, taken before the optimizer may change them in place."""
    return {name: PredictorState(p.signature.instructions, [demo_fields(d, item_id) for d in p.demos])
            for name, p in program.named_predictors()}


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
    """Judge each predictor's instruction in `compiled` against its original; put a rejected one back."""
    reviews = []
    for name, pred in compiled.named_predictors():
        proposed = PredictorState(pred.signature.instructions, [demo_fields(d, item_id) for d in pred.demos])
        original = before.get(name, PredictorState(proposed.instruction, []))
        verdict = judge(proposed.instruction, original.instruction, inputs, limits)
        if not verdict.adopted:
            pred.signature = pred.signature.with_instructions(original.instruction)
        reviews.append(PredictorReview(name, original, proposed, verdict))
    return reviews


def any_rejected(reviews: list[PredictorReview]) -> bool:
    return any(not r.verdict.adopted for r in reviews)

