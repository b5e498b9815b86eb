"""`optimizer=logistic`: fit every learned logistic head of a copy of the student (a sub-module with a `LogisticHead`
named `scorer` and its own `fit`), each against its own subtask's metric, with an optional fixed L2 strength `c`."""

from __future__ import annotations

from typing import Any

import dspy

from common.errors import ConfigError, number_in
from common.parameters import LogisticHead
from optimizers.fit_learned import learned_parts


def learned_heads(program: dspy.Module) -> dict[str, Any]:
    """{name: module} of the program's learned parts whose weights are a LogisticHead `scorer`."""
    return {name: module for name, module in learned_parts(program)
            if isinstance(getattr(module, "scorer", None), LogisticHead)}


class LogisticFit(dspy.teleprompt.Teleprompter):
    """Fits every learned head of the student on `trainset` (cases with a key). `c`: the L2 strength (null: each
    head chooses it by inner cross-validation)."""

    def __init__(self, metric: Any = None, c: float | None = None) -> None:
        super().__init__()
        self.metric, self.c = metric, number_in("optimizer.teleprompter.c", c, 0, low_open=True, null=True)
        self.fit_reports: dict[str, Any] = {}

    def preflight(self, program: dspy.Module, trainset: list[dspy.Example]) -> None:
        """Each head's own check of the training data, before the compile scores validation."""
        for module in learned_heads(program).values():
            if callable(getattr(module, "preflight", None)):
                module.preflight(trainset)

    def compile(self, student: dspy.Module, *, trainset: list[dspy.Example], valset: list | None = None,
                **_: Any) -> dspy.Module:
        program = student.deepcopy()
        heads = learned_heads(program)
        if not heads:
            raise ConfigError("optimizer=logistic: the program has no learned head to fit (a stage with a "
                              "LogisticHead `scorer` and a fit: e.g. program/archehr/evidence=learned)")
        for name, module in heads.items():
            self.fit_reports[name] = module.fit(trainset, valset or [], program=program, c=self.c)
        return program
