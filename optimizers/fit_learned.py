"""`optimizer=fit`: calls `fit(trainset, valset)` on every sub-module of a copy of the student that defines it; what
each fit measured is kept in `fit_reports` for the compile report."""

from __future__ import annotations

import inspect
from typing import Any

import dspy

from common.errors import ConfigError


def learned_parts(program: dspy.Module) -> list[tuple[str, Any]]:
    """(name, module) of every sub-module with a callable `fit`."""
    return [(name.removeprefix("self."), module) for name, module in program.named_sub_modules()
            if callable(getattr(type(module), "fit", None)) and module is not program]


class FitLearned:
    def __init__(self, metric: Any = None, only: list[str] | None = None) -> None:
        self.metric = metric  # each part fits its own objective
        self.only = list(only or [])
        self.fit_reports: dict[str, Any] = {}

    def parts(self, program: dspy.Module) -> list[tuple[str, Any]]:
        """The learned parts this compile fits (`only`, else every one); none is one line."""
        parts = [(n, m) for n, m in learned_parts(program) if not self.only or n in self.only]
        if not parts:
            names = [n for n, _ in learned_parts(program)]
            raise ConfigError("optimizer=fit: the program has no learned part to fit" +
                              (f" named {self.only} (it has {names})" if self.only else
                               " (a part defines fit(trainset, valset); e.g. program/archehr/grounding=reader)"))
        return parts

    def preflight(self, program: dspy.Module, trainset: list[dspy.Example]) -> None:
        """Each part's own check of the training data, before the compile spends time scoring validation."""
        for _, module in self.parts(program):
            if callable(getattr(module, "preflight", None)):
                module.preflight(trainset)

    def compile(self, student: dspy.Module, *, trainset: list[dspy.Example],
                valset: list[dspy.Example] | None = None) -> dspy.Module:
        program = student.deepcopy()
        for name, module in self.parts(program):
            # a part whose features use another stage's output gets the program it is fitted in
            takes_program = "program" in inspect.signature(module.fit).parameters
            extra = {"program": program} if takes_program else {}
            self.fit_reports[name] = module.fit(trainset, valset or [], **extra)
        return program

    def review(self, compiled: dspy.Module, valset: list[dspy.Example], metric: Any) -> dict[str, Any]:
        """What each part's fit measured, one line each; a part whose fit says `refused` is not adopted."""
        lines, refused = [], []
        for name, fit in self.fit_reports.items():
            shown = {k: v for k, v in (fit or {}).items() if not isinstance(v, (dict, list))}
            lines.append(f"{name}: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
            if (fit or {}).get("refused"):
                refused.append(f"{name}: {fit['refused']}")
        return {"lines": lines, "refused": refused, "fits": self.fit_reports}
