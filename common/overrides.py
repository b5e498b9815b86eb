"""Refuse, in one line, a command-line parameter of a stage implementation that is not in use.

`program.evidence.strict_threshold=5` with the default (embedding) evidence stage would otherwise end in Hydra's
multi-line "not in struct" error that suggests `+program.evidence...`, which would only move the problem. Stage
implementations are config groups whose files hold only their own parameters, so a key that is not in the chosen
file belongs to another implementation (or to none): say which, and how to switch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from common.config_groups import compose_config, options

CONF = Path(__file__).resolve().parents[1] / "conf"


def _stage_groups(stage: str) -> list[Path]:
    return sorted(p for p in (CONF / "program").glob(f"*/{stage}") if p.is_dir())


def _option_keys(folder: Path) -> dict[str, set[str]]:
    out = {}
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        out[path.stem] = {k for k in data if not str(k).startswith("_") and k != "defaults"}
    return out


MAX_NESTING = 32  # brackets deep in one override: Hydra's parser and OmegaConf recurse once a level


def too_deeply_nested(argv: list[str]) -> str | None:
    """The refusal line for the first override whose value nests `[`/`{` deeper than MAX_NESTING (300 levels were a
    RecursionError traceback from Hydra); None when there is none."""
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


def dead_stage_key(argv: list[str]) -> str | None:
    """The refusal line for the first `program.<stage>.<param>=...` override whose stage implementation (after the
    command line's group choices) has no such parameter; None when there is none (or the config does not compose:
    Hydra then reports that itself)."""
    params = [a for a in argv if not a.startswith("-") and "=" in a and a.split("=", 1)[0].lstrip("+~").count(".") >= 2
              and a.lstrip("+~").startswith("program.")]
    if not params:
        return None
    others = [a for a in argv if a not in params and not a.startswith("-") and "=" in a
              and not a.startswith(("hydra.", "hydra/"))]
    try:
        cfg = compose_config(*others)
    except Exception:  # noqa: BLE001 - Hydra reports a config that does not compose
        return None
    for arg in params:
        key = arg.split("=", 1)[0].lstrip("+~")
        _, stage, name = key.split(".", 2)
        name = name.split(".", 1)[0]
        node: Any = cfg.program.get(stage)
        if not hasattr(node, "get") or not node.get("_target_") or name in node:
            continue
        # the stage's group and the option in use: the one whose _target_ the composed node has
        found = [(g.relative_to(CONF).as_posix(), o) for g in _stage_groups(stage)
                 for o, target in options(g.relative_to(CONF).as_posix()).items() if target == node._target_]
        if not found:
            continue
        rel, current = found[0]
        options_keys = _option_keys(CONF / rel)
        having = [o for o, keys in options_keys.items() if name in keys]
        switch = (f"it belongs to {', '.join(having)}: add {rel}={having[0]}" if having
                  else f"no implementation of {stage} has it")
        return (f"{key}: not a parameter of the {stage} stage in use ({rel}={current}, parameters: "
                f"{', '.join(sorted(options_keys.get(current, set())))}); {switch}")
    return None


def _close(word: str, choices: list[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def _key_suggestion(key: str, argv: list[str]) -> str:
    """`did you mean <the closest valid key>?` for a dotted key the config does not have ('' when none is close)."""
    others = [a for a in argv if "=" in a and not a.startswith("-") and a.split("=", 1)[0].lstrip("+~") != key
              and not a.startswith(("hydra.", "hydra/"))]
    try:
        node: Any = compose_config(*others)
    except Exception:  # noqa: BLE001 - the rest of the line does not compose either: no suggestion
        return ""
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
    """One line for a command line Hydra cannot compose (a mistyped key, group or option), naming the closest valid
    one, instead of Hydra's multi-line message (which advises `+key=...`, adding the typo as a new key)."""
    import re

    text = str(exc).strip()
    missing = re.search(r"Could not find '([^']+)'", text)
    if missing:  # lm=gemeni: an option that is not a file of its group
        group, _, option = missing[1].rpartition("/")
        names = sorted(options(group)) if group else []
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
        return f"{key}: no such key in the config{_key_suggestion(key, argv)}"
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"cannot read the command line: {first}"
