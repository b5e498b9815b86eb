"""Renamed public names that keep working for one release: the old name on a command line is rewritten to the new one
before Hydra composes it, with one `deprecated:` line on stderr naming the new one.

A rename of a config option (`experiment=offline_best` -> `experiment=no_lm_best`) or of a config key
(`program.cascade` -> `program.module`) broke every script and saved multirun command that used the old name; an
entry in `ALIASES` keeps those working until the next release, which deletes the entry. The table is the one place:
`main.py` rewrites `sys.argv` through `renamed` (so the run's `.hydra/overrides.yaml`, its `choices` and its folder
fingerprint all carry the new name, and a run started with the old name resumes with the new one), and
tests/test_aliases.py composes every entry against its new name. Not an alias: a name whose meaning went with it
(`program/archehr/question=rule`, deleted in #26) stays an error naming the options there are.

Module paths are public names too (a user's config says `_target_: programs.archehr.no_lm.SimilarityAligner`, a
script imports `programs.archehr.question_model`): `MOVED_MODULES` lists the moved ones, and `MovedModuleFinder`
(installed by programs/archehr/__init__.py) makes `import <old>` give the new module object itself, after one
`deprecated:` line on stderr; tests/test_moved_modules.py imports every entry.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import re
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO


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


@dataclass(frozen=True)
class MovedModule:
    """Module `old` moved to `new`: with one new module, `import old` gives that module object itself (its classes
    are the same objects); with several (a module split by stage), a stand-in module whose names are looked up in
    each new module in turn. A package's entry covers its submodules (`old.x` is `new.x`) that have none of their own."""

    old: str
    new: tuple[str, ...]
    renamed_in: str = ""

    def line(self) -> str:
        return f"deprecated: {self.old} is now {', '.join(self.new)}; the old name goes in the next release"


def _moved(old: str, *new: str) -> MovedModule:
    return MovedModule(f"programs.archehr.{old}", tuple(f"programs.archehr.{n}" for n in new), "#52 item 3")


# programs/archehr/ as one package per stage (#52 item 3). Not listed: the old modules `programs.archehr.evidence`,
# `.answer` and `.grounding`, whose names are now the stage packages: each package's __init__ re-exports the old
# module's public names (so `programs.archehr.evidence.EvidenceScorer` still resolves), with no deprecation line.
MOVED_MODULES: tuple[MovedModule, ...] = (
    _moved("interpret", "question.lm"),
    _moved("demos", "question.demos"),
    _moved("question_baseline", "question.baseline"),
    _moved("question_model", "question.finetuned"),
    _moved("question_finetune", "question.finetune"),
    _moved("question_text", "question.text"),
    _moved("align", "alignment.lm"),
    _moved("grounding_claims", "grounding.claims"),
    _moved("grounding_learned", "grounding.learned"),
    _moved("grounding_judge", "grounding.judge"),
    _moved("verdicts", "grounding.verdicts"),
    _moved("verifier", "grounding.verifier"),
    _moved("no_lm", "evidence.embedding", "answer.extractive", "alignment.similarity"),
    _moved("no_lm.evidence", "evidence.embedding"),
    _moved("no_lm.answer", "answer.extractive"),
    _moved("no_lm.align", "alignment.similarity"),
    _moved("no_lm.learned", "evidence.learned", "alignment.learned", "shared.heads"),
    _moved("no_lm.fitting", "evidence.fit", "alignment.fit", "shared.heads"),
    _moved("no_lm.features", "evidence.features", "alignment.features", "shared.features"),
    _moved("no_lm.lexical", "shared.lexical"),
    _moved("no_lm.similarity", "shared.similarity"),
    _moved("no_lm.clinical_lexicon", "shared.clinical_lexicon"),
    _moved("no_lm.note_layout", "shared.note_layout"),
    _moved("no_lm.claims", "shared.claims"),
    _moved("no_lm.selection", "shared.selection"),
)


def moved_module(name: str, table: Sequence[MovedModule] = MOVED_MODULES) -> MovedModule | None:
    """`name`'s entry, or for a submodule of a moved package (`programs.archehr.verifier.pairs`) one made from its
    package's entry; None for a name that did not move."""
    by_old = {m.old: m for m in table}
    if name in by_old:
        return by_old[name]
    package, _, rest = name.rpartition(".")
    while package:
        entry = by_old.get(package)
        if entry is not None and len(entry.new) == 1:
            return MovedModule(name, (f"{entry.new[0]}.{name[len(package) + 1:]}",), entry.renamed_in)
        package, _, rest = package.rpartition(".")
    return None


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import <old>` for an entry of MOVED_MODULES: the new module (the same object), or for a split module a
    stand-in that looks its names up in the new ones; one `deprecated:` line on stderr when the old name is first
    imported (then it is in sys.modules)."""

    def __init__(self, table: Sequence[MovedModule] = MOVED_MODULES) -> None:
        self.table = tuple(table)
        # first on sys.meta_path, it is asked about every import of the process (thousands): one prefix test
        # answers all but the old names
        self.prefixes = tuple({m.old.rsplit(".", 1)[0] + "." for m in self.table})
        self.listed = {m.old for m in self.table}
        self.announced: set[str] = set()   # old names whose line was printed

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(self.prefixes):
            return None
        moved = moved_module(fullname, self.table)
        if moved is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, loader_state=moved)

    def create_module(self, spec: Any) -> types.ModuleType:
        moved: MovedModule = spec.loader_state
        if len(moved.new) == 1:
            module = importlib.import_module(moved.new[0])
            spec.loader_state = (moved, module.__spec__)   # the import machinery sets __spec__: put it back
            return module
        stand_in = types.ModuleType(moved.old, f"Deprecated: {moved.line()[len('deprecated: '):]}.")
        stand_in.__path__ = []   # so its own moved submodules import (`programs.archehr.no_lm.evidence`)

        def lookup(name: str) -> Any:
            for new in moved.new:
                module = importlib.import_module(new)
                if hasattr(module, name):
                    return getattr(module, name)
            raise AttributeError(f"module {moved.old!r} has no attribute {name!r} (it is now {', '.join(moved.new)})")

        stand_in.__getattr__ = lookup  # type: ignore[method-assign]
        spec.loader_state = (moved, None)
        return stand_in

    def exec_module(self, module: types.ModuleType) -> None:
        moved, own_spec = module.__spec__.loader_state
        if own_spec is not None:
            module.__spec__ = own_spec
        if _importing_a_submodule_of(moved.old):  # `import old.pkg.mod`: the line of old.pkg.mod alone
            return
        package = moved.old.rpartition(".")[0]
        if moved.old not in self.listed and package in self.announced:
            return  # old.pkg's line said where old.pkg.mod went (`from old.pkg import mod`)
        self.announced.add(moved.old)
        print(moved.line(), file=sys.stderr)


def _importing_a_submodule_of(package: str) -> bool:
    """Whether `package` is being imported as the parent of a module the import statement names (Python imports
    `a.b` before `a.b.c`): the more specific module's line then stands for both. Read from the import machinery's
    frames (CPython's `_find_and_load_unlocked(name, ...)`); elsewhere it is False and both lines are printed."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load_unlocked":
            name = frame.f_locals.get("name")
            if isinstance(name, str) and name.startswith(package + "."):
                return True
        frame = frame.f_back
    return False


def install_moved_modules() -> None:
    """Put a MovedModuleFinder first on sys.meta_path (once): first, so that a leftover folder of an old package
    (`programs/archehr/no_lm/` holding only `__pycache__`) is not imported as an empty namespace package."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
