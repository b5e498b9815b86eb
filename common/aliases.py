"""Renamed public names that keep working for one release: the old name on a command line is rewritten to the new one
before Hydra composes it, with one `deprecated:` line on stderr naming the new one.

A rename of a config option (`experiment=offline_best` -> `experiment=no_lm_best`) or of a config key
(`program.cascade` -> `program.module`) broke every script and saved multirun command that used the old name; an
entry in `ALIASES` keeps those working until the next release, which deletes the entry. The table is the one place:
`main.py` rewrites `sys.argv` through `renamed` (so the run's `.hydra/overrides.yaml`, its `choices` and its folder
fingerprint all carry the new name, and a run started with the old name resumes with the new one), and
tests/test_aliases.py composes every entry against its new name. Not an alias: a name whose meaning went with it
(`program/archehr/question=rule`, deleted in #26) stays an error naming the options there are.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class Alias:
    """`old` renamed to `new`: options of config `group` (`group=old` -> `group=new`), or, with no group, dotted
    config keys (`old.x=1` -> `new.x=1`)."""

    old: str
    new: str
    group: str | None = None
    renamed_in: str = ""   # the issue and commit that renamed it (where to read why)

    @property
    def before(self) -> str:
        return f"{self.group}={self.old}" if self.group else self.old

    @property
    def after(self) -> str:
        return f"{self.group}={self.new}" if self.group else self.new

    def line(self) -> str:
        return f"deprecated: {self.before} is now {self.after}; the old name goes in the next release"


# Every public name renamed since the stages became config groups (#19), from `git log --diff-filter=R -- conf/`
# and the renames the commit messages name. Remove an entry one release after its rename. (conf/program/archehr/stages/
# offline.yaml -> no_lm.yaml needs none: that group follows `stages` through `${stages}` and is not set by hand.)
ALIASES: tuple[Alias, ...] = (
    Alias("offline_best", "no_lm_best", group="experiment", renamed_in="#39 item 1 (a94e508)"),
    Alias("offline", "no_lm", group="stages", renamed_in="#27 item 5 (090e10f)"),
    Alias("offline", "no_lm", group="program/archehr/fallback", renamed_in="#27 item 5 (090e10f)"),
    Alias("program.cascade", "program.module", renamed_in="#27 item 3 (1b11a24)"),
)


def _option(name: str) -> re.Pattern[str]:
    """`name` as a whole option in an override's value: `offline_best`, and in a sweep `a,offline_best`,
    `choice(offline_best,b)` or `[offline_best]`, but not `offline_best2` or `x/offline_best`."""
    return re.compile(rf"(?<![\w./-]){re.escape(name)}(?![\w./-])")


def rewrite_one(arg: str) -> tuple[str, list[Alias]]:
    """`arg` with every old name it uses replaced by the new one, and the aliases it used. A flag (`-m`, `--cfg`),
    a value without `=` (the `job` of `--cfg job`) and a `hydra.*` override pass unchanged."""
    if arg.startswith("-") or ("=" not in arg and not arg.startswith("~")):
        return arg, []
    prefix = arg[:len(arg) - len(arg.lstrip("+~"))]  # Hydra's +, ++ (add) and ~ (delete)
    key, eq, value = arg[len(prefix):].partition("=")
    name, at, package = key.partition("@")
    used: list[Alias] = []
    for alias in ALIASES:
        if alias.group is not None:
            pattern = _option(alias.old)
            if name == alias.group and eq and pattern.search(value):
                value = pattern.sub(alias.new, value)
                used.append(alias)
        elif name == alias.old or name.startswith(alias.old + "."):
            name = alias.new + name[len(alias.old):]
            used.append(alias)
    return prefix + name + at + package + eq + value, used


def rewrite(argv: Sequence[str]) -> tuple[list[str], list[Alias]]:
    """The command line with every old name replaced, and the aliases it used (each once, in order)."""
    out: list[str] = []
    used: list[Alias] = []
    for arg in argv:
        new, found = rewrite_one(arg)
        out.append(new)
        used += [a for a in found if a not in used]
    return out, used


def renamed(argv: Sequence[str], stream: TextIO | None = None) -> list[str]:
    """`rewrite(argv)`'s command line, after one `deprecated:` line per old name used on `stream` (stderr), as the
    command line's other refusals before Hydra composes (main.py's `error:` lines)."""
    out, used = rewrite(argv)
    for alias in used:
        print(alias.line(), file=stream or sys.stderr)
    return out
