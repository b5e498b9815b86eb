"""The runtime objects a program's stages share, and how they complete the stages' partial configs.

A stage implementation is configured as a `_partial_: true` node holding only its own parameters
(`conf/program/<program>/<stage>/<implementation>.yaml`). What must be ONE object for the whole program (the loaded
sentence embedder, an LM per role, the agent's search tool) is not configuration: the contract builds it once into a
`Resources` and `complete` passes each resource to every partial whose callable takes a parameter of that name.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field, fields
from typing import Any

from common.errors import ConfigError

_UNSET = object()


@dataclass
class Resources:
    """Shared runtime objects; a field left None is not provided (a stage that needs it gets one clear error)."""

    embedder: Any = None                                   # retrieval.embed.Embedder (loads its model on first use)
    role_lms: dict[str, Any] = field(default_factory=dict)  # role -> dspy.LM (empty: no stage calls an LM)
    search: Any = _UNSET                                   # the agent's search tool (None: search disabled)

    def provided(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not _UNSET}

    def complete(self, obj: Any, where: str, hint: str = "", **extra: Any) -> Any:
        """Call a partial built by `hydra.utils.instantiate` (nested partials first) with the resources its callable
        takes by name, plus `extra`; anything else is returned as it is. A parameter the implementation does not
        have (e.g. added with `+program.evidence.x=1`) is one line naming the implementation and its parameters."""
        if not isinstance(obj, functools.partial):
            return obj
        func = obj.func
        keywords = {k: self.complete(v, f"{where}.{k}") for k, v in obj.keywords.items()}
        params = _parameters(func)
        unknown = sorted(k for k in keywords if k not in params)
        if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            settable = sorted(k for k, p in params.items() if k not in self.provided() and k not in extra
                              and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
            raise ConfigError(f"{where}.{unknown[0]}: not a parameter of the implementation in use ({_name(func)}); "
                              f"its parameters: {settable}" + (f"; {hint}" if hint else ""))
        available = {**self.provided(), **extra}
        for name in params:
            if name not in keywords and name in available:
                keywords[name] = available[name]
        return func(*obj.args, **keywords)


def _parameters(func: Any) -> dict[str, inspect.Parameter]:
    target = func.__init__ if inspect.isclass(func) else func
    params = dict(inspect.signature(target).parameters)
    params.pop("self", None)
    return params


def _name(func: Any) -> str:
    return f"{func.__module__}.{func.__qualname__}"
