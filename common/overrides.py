"""One line for a command line Hydra cannot compose, naming the closest valid key, group or option, instead of
Hydra's multi-line message (which advises `+key=...`, adding the typo as a new key)."""

from __future__ import annotations

from typing import Any

import yaml
from omegaconf import DictConfig

from common.config_groups import CONF, choice, compose_config, options
from common.errors import unknown_setting


def _option_keys(group: str) -> dict[str, set[str]]:
    """{option: its parameters} of conf/<group>/ (each option file's own top-level keys)."""
    out = {}
    for path in sorted((CONF / group).glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        out[path.stem] = {k for k in data if not str(k).startswith("_") and k != "defaults"}
    return out


MAX_NESTING = 32  # brackets deep in one override: Hydra's parser and OmegaConf recurse once a level


def too_deeply_nested(argv: list[str]) -> str | None:
    """The refusal line for the first override whose value nests `[`/`{` deeper than MAX_NESTING; None when none does."""
    for arg in argv:
        depth = deepest = 0
        for ch in arg:
            if ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth -= 1
        if deepest > MAX_NESTING:
            return (f"{arg.split('=', 1)[0]}: a value nested {deepest} levels deep; the command line takes at most "
                    f"{MAX_NESTING}")
    return None


def dead_stage_key(key: str, cfg: DictConfig) -> str | None:
    """The refusal line for `program.<stage>.<param>` (a key Hydra could not set) when the stage implementation `cfg`
    chose has no such parameter (it belongs to another option or none); None when `key` is no stage parameter."""
    parts = key.lstrip("+~").split(".")
    if len(parts) < 3 or parts[0] != "program":
        return None
    stage, name = parts[1], parts[2]
    node: Any = cfg.program.get(stage)
    group = f"program/{cfg.program.name}/{stage}"
    current = choice(cfg, group)
    # an option without parameters (grounding=none) composes to an empty node: still a stage lacking the key
    if current is None or not (CONF / group).is_dir() or (hasattr(node, "get") and name in node):
        return None
    option_keys = _option_keys(group)
    having = [o for o, keys in option_keys.items() if name in keys]
    switch = (f"it belongs to {', '.join(having)}: add {group}={having[0]}" if having
              else f"no implementation of {stage} has it")
    return str(unknown_setting(key, f"{group}={current} (the {stage} stage in use)", option_keys.get(current, ()), switch))


def _close(word: str, choices: list[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def _without(key: str, argv: list[str]) -> DictConfig | None:
    """The command line composed without `key`'s override (None when the rest does not compose either)."""
    others = [a for a in argv if "=" in a and not a.startswith("-") and a.split("=", 1)[0].lstrip("+~") != key
              and not a.startswith(("hydra.", "hydra/"))]
    try:
        return compose_config(*others)
    except Exception:  # noqa: BLE001 - the rest of the line does not compose either: no suggestion
        return None


def _key_suggestion(key: str, cfg: DictConfig | None) -> str:
    """`did you mean <the closest valid key>?` for a dotted key the config does not have ('' when none is close)."""
    if cfg is None:
        return ""
    node: Any = cfg
    done: list[str] = []
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not hasattr(node, "keys"):
            return ""
        if part not in node:
            close = _close(part, [str(k) for k in node.keys()])
            return f"; did you mean {'.'.join([*done, close, *parts[i + 1:]])}?" if close else (
                f"; {'.'.join(done) or 'the config'} has: {', '.join(sorted(str(k) for k in node.keys())[:20])}")
        done.append(part)
        node = node[part]
    return ""


def config_mistake(argv: list[str], exc: Exception) -> str:
    import re

    text = str(exc).strip()
    missing = re.search(r"Could not find '([^']+)'", text)
    if missing:  # lm=gemeni: an option that is not a file of its group
        group, _, option = missing[1].rpartition("/")
        names = options(group) if group else []
        close = _close(option, names)
        hint = f"did you mean {group}={close}? " if close else ""
        return f"{group}={option}: conf/{group}/ has no {option}.yaml; {hint}options: {', '.join(names) or 'none'}"
    override = re.search(r"Could not override '([^']+)'", text)
    if override:
        key = override[1]
        if "/" in key:  # program/archehr/evidnce=lm: a group that does not exist
            parent, _, name = key.rpartition("/")
            groups = sorted(p.name for p in (CONF / parent).iterdir() if p.is_dir()) if (CONF / parent).is_dir() else []
            close = _close(name, groups)
            return f"{key}: no such config group" + (f"; did you mean {parent}/{close}?" if close else
                                                        f"; {parent}/ has: {', '.join(groups) or 'none'}")
        rest = _without(key, argv)
        dead = dead_stage_key(key, rest) if rest is not None else None
        group = key.rpartition(".")[2]
        if not dead and "." in key and (CONF / group).is_dir():  # run.executor=ray: now a group of its own
            value = next((a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+~") == key), "")
            return f"{key}: no such key in the config; {group} is a config group: {group}={value or '<option>'}"
        return dead or f"{key}: no such key in the config{_key_suggestion(key, rest)}"
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"cannot read the command line: {first}"
