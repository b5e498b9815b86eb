"""Which option of a config group a composed node came from (for reports and one-line errors).

A stage implementation is a file `conf/<group>/<option>.yaml` with a `_target_`; the composed config keeps the
node, not the option's name. The name is found again from the `_target_` (each option of a stage group has its
own class), so a run folder's `config.json` still says `evidence=embedding` when the report is rebuilt later.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

CONF = Path(__file__).resolve().parents[1] / "conf"


def compose_config(*overrides: str) -> DictConfig:
    """conf/ composed as `python main.py <overrides>` would (for scripts, benchmarks, notebooks, tests)."""
    from hydra import compose, initialize_config_dir

    import common.instantiate  # noqa: F401 - clinprog's resolvers

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@lru_cache(maxsize=64)
def options(group: str) -> dict[str, str]:
    """{option: _target_} of the files in conf/<group>/ (options without a top-level _target_ map to '')."""
    folder = CONF / group
    out: dict[str, str] = {}
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # the option's own file, as Hydra reads it
        out[path.stem] = str(data.get("_target_") or "") if isinstance(data, dict) else ""
    return out


def option_of(group: str, node: Any) -> str:
    """The option of `group` whose `_target_` the node has ('none' for an empty node; else the class name)."""
    target = (node or {}).get("_target_") if hasattr(node, "get") else None
    if not target:
        return "none"
    for name, option_target in options(group).items():
        if option_target == target:
            return name
    return str(target).rsplit(".", 1)[-1]
