"""`hydra.utils.instantiate` with shared runtime objects.

Program configs name stage implementations as nested `_target_`s. Some arguments are runtime resources that
must be ONE object for the whole program (the loaded embedder, an LM per role, the search tool, few-shot demos):
a config value `${shared:embedder}` marks where such a resource goes, and `build(node, embedder=obj)` puts the
same object at every marked place before instantiating.
"""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from common.errors import ConfigError

_MARK = "<shared:{}>"
if not OmegaConf.has_resolver("shared"):
    OmegaConf.register_new_resolver("shared", lambda name: _MARK.format(name))
if not OmegaConf.has_resolver("output_group"):
    # Run folders: outputs/<program>/... for a program's tasks, outputs/<task>/... for index, search, report, ...
    OmegaConf.register_new_resolver(
        "output_group", lambda task, program, program_tasks: program if task in program_tasks else task)


def _inject(value: Any, shared: dict[str, Any], where: str) -> Any:
    if isinstance(value, dict):
        return {k: _inject(v, shared, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_inject(v, shared, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str) and value.startswith("<shared:") and value.endswith(">"):
        name = value[len("<shared:"):-1]
        if name not in shared:
            raise ConfigError(f"{where}: ${{shared:{name}}} is not a resource this program provides ({sorted(shared)})")
        return shared[name]
    return value


def build(node: DictConfig | dict, where: str = "program.module", **shared: Any) -> Any:
    """Instantiate `node` (nested `_target_`s), putting `shared[name]` wherever the config says `${shared:name}`."""
    container = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    return instantiate(_inject(container, shared, where), _convert_="partial")


def choose(node: DictConfig, choice: str, where: str) -> DictConfig:
    """`node[choice]` with one clear error listing the choices (stage implementations selected by name)."""
    if choice not in node:
        raise ConfigError(f"{where}={choice!r}: choose one of {sorted(node)}")
    return node[choice]
