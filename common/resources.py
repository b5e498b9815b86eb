"""The runtime objects a program's stages share (the embedder, an LM per role, the search tool): the contract builds
them once into `Resources`, and `complete` passes each to every stage partial (a `_partial_: true` node) whose
callable takes a parameter of that name."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field, fields
from typing import Any

from common.errors import ConfigError, unknown_setting

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
        """Call a partial (nested partials first) with the resources its callable takes by name, plus `extra`; anything
        else is returned as it is. A parameter the implementation does not have is one line naming its parameters."""
        if not isinstance(obj, functools.partial):
            return obj
        func = obj.func
        keywords = {k: self.complete(v, f"{where}.{k}") for k, v in obj.keywords.items()}
        params = dict(inspect.signature(func.__init__ if inspect.isclass(func) else func).parameters)
        params.pop("self", None)
        unknown = sorted(k for k in keywords if k not in params)
        if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            settable = sorted(k for k, p in params.items() if k not in self.provided() and k not in extra
                              and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
            raise unknown_setting(f"{where}.{unknown[0]}", f"{func.__module__}.{func.__qualname__} (the implementation "
                                  "in use)", settable, hint)
        available = {**self.provided(), **extra}
        for name in params:
            if name not in keywords and name in available:
                keywords[name] = available[name]
        return func(*obj.args, **keywords)


def instantiate_node(node: Any, where: str) -> Any:
    """`hydra.utils.instantiate` of a node the program cannot do without (`program.module`): a node removed or whose
    `_target_` Hydra refuses to import or call is one line saying how to get it back; a builder's own failure
    propagates as it is."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    restore = f"drop the override of {where} (each program=<name> sets its own)"
    target = node.get("_target_") if hasattr(node, "get") else None
    if not target:
        raise ConfigError(f"{where} is {'missing' if node is None else 'not a config with a _target_'}: it names the "
                          f"program's dspy.Module; {restore}")
    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as exc:
        if exc.__cause__ is not None and not isinstance(exc.__cause__, ImportError):
            raise  # the builder ran and failed: its own error
        said = " ".join(str(exc).split("full_key:")[0].split()).split(", set env var HYDRA_FULL_ERROR")[0].rstrip(".")
        raise ConfigError(f"{where}._target_={target}: {said}; {restore}") from None

