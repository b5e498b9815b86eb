"""Config groups: which option of each group a run chose, and the options a group offers. Hydra records the choices
in `hydra.runtime.choices`; they are copied into the config as `choices`, so reports and `config.json` name them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

CONF = Path(__file__).resolve().parents[1] / "conf"
CHOICES = "choices"   # the config key that holds Hydra's runtime.choices of the run (its own groups, not hydra/*)


def with_choices(cfg: DictConfig, choices: Mapping[str, Any]) -> DictConfig:
    """`cfg` with `choices` set to Hydra's runtime choices (hydra/* left out; a null choice kept as null)."""
    with open_dict(cfg):
        cfg[CHOICES] = {str(k): (None if v is None else str(v)) for k, v in choices.items()
                        if not str(k).startswith("hydra/")}
    return cfg


def compose_config(*overrides: str) -> DictConfig:
    """conf/ composed as `python main.py <overrides>` would, with its `choices` (for scripts, benchmarks, tests)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    choices = dict(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return with_choices(cfg, choices)


def choice(cfg: Any, group: str) -> str | None:
    """The option the run chose for `group` (a path under conf/, e.g. `program/archehr/evidence`); None when the
    config holds no choices or the group was not chosen."""
    found = (cfg.get(CHOICES) or {}).get(group) if hasattr(cfg, "get") else None
    return None if found is None else str(found)


def chosen_name(cfg: Any, group: str, node: Any) -> str:
    """What to call the option of `group` that built `node`: the run's choice, else the last part of its `_target_`."""
    return choice(cfg, group) or str(node.get("_target_") or "none").rsplit(".", 1)[-1]


def options(group: str) -> list[str]:
    """The options of `group`: the YAML files in conf/<group>/ (sorted names, without .yaml)."""
    folder = CONF / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
