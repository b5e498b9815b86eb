"""Every override a message or the README suggests names a key that exists: following a hint must not fail in Hydra.

The hints are collected from the source (string literals outside docstrings: error messages, prints, logs) and from
the README's `python main.py ...` commands; each `key=value` whose first part is a config key is checked against the
composed configs (every program x every LM, and the other swappable groups).
"""

from __future__ import annotations

import ast
import itertools
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from common.config_groups import compose_config

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SOURCE_DIRS = ("common", "runners", "programs", "tasks", "retrieval", "lms", "optimizers", "serving", "reports",
               "signatures")
HINT = re.compile(r"(?<![\w.\-/$\[{])([a-z_][a-z_0-9]*(?:\.[a-z_][a-z_0-9]*)*)=([^\s,;:)'\"`]*)")
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir())
# Contexts in which a key may exist: a key of lm=gemini only needs to exist with lm=gemini.
CONTEXT_GROUPS = {"retriever": ["weaviate", "weaviate_cluster"], "reranker": ["medcpt"], "tracking": ["mlflow"],
                  "optimizer": ["bootstrap", "mipro", "gepa"], "executor": ["ray"],
                  "experiment": ["no_lm_best"],
                  # implementations of a stage other than the default run's (their keys exist once chosen)
                  "program/archehr/evidence": ["embedding", "embedding_likert"],
                  "program/archehr/alignment": ["similarity"]}


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@cache
def contexts() -> list[dict]:
    overrides = [[f"program={p}", f"lm={lm}"] for p, lm in itertools.product(_options("program"), _options("lm"))]
    overrides += [[f"{g}={o}"] for g, opts in CONTEXT_GROUPS.items() for o in opts]
    return [OmegaConf.to_container(compose_config(*o), resolve=False) for o in overrides]


def _has_path(node: dict, path: str) -> bool:
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def problem(key: str, value: str) -> str | None:
    """Why `key=value` would fail as an override; None when it composes."""
    base = contexts()[0]
    if key.split(".")[0] not in {*base, *GROUPS, "hydra"}:
        return None  # not a config key (an HTML attribute, a keyword in prose)
    if key.startswith("hydra."):
        return None
    placeholder = not value or "..." in value or value.startswith(("<", "{", "P", "/"))
    if key in GROUPS:
        if placeholder or value in _options(key):
            return None
        return f"{key}={value}: no conf/{key}/{value}.yaml (options: {_options(key)})"
    if any(_has_path(c, key) for c in contexts()):
        return None
    return f"{key}: no such key in any composed config"


def source_hints() -> list[tuple[str, str, str]]:
    hints = []
    for path in [ROOT / "main.py", *(p for d in SOURCE_DIRS for p in sorted((ROOT / d).rglob("*.py")))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                for m in HINT.finditer(node.value):
                    hints.append((f"{path.relative_to(ROOT)}:{node.lineno}", m.group(1), m.group(2)))
    return hints


def readme_hints() -> list[tuple[str, str, str]]:
    hints = []
    for n, line in enumerate((ROOT / "README.md").read_text(encoding="utf-8").splitlines(), 1):
        if "python main.py" not in line:
            continue
        command = re.split(r"`|&&|\|", line.split("python main.py", 1)[1])[0]
        try:
            args = shlex.split(command, comments=True)
        except ValueError:  # prose around an inline command
            args = command.split()
        for arg in args:
            if "=" in arg and not arg.startswith(("+", "~", "-")):
                key, value = arg.split("=", 1)
                hints.append((f"README.md:{n}", key, value))
    return hints


def readme_commands() -> list[tuple[str, list[str]]]:
    """Each README `python main.py ...` command in a code block, as its list of overrides (a multirun's first value)."""
    out, in_block = [], False
    for n, line in enumerate((ROOT / "README.md").read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
        if not in_block or not line.startswith("python main.py"):
            continue
        command = re.split(r"&&|\|", line.split("python main.py", 1)[1])[0]
        if command.rstrip().endswith("\\"):
            command = command.rstrip()[:-1]  # a continued line: its first part is checked
        args = shlex.split(command, comments=True)
        multirun = "-m" in args
        overrides = []
        for arg in args:
            if arg.startswith(("-", "hydra.", "hydra/")) or arg == "...":
                continue
            arg = re.sub(r"<[^<>=]*>", "X", arg)  # placeholders such as <time>
            if multirun and "," in arg and "[" not in arg and "{" not in arg:
                arg = arg.split(",", 1)[0]
            overrides.append(arg)
        out.append((f"README.md:{n}", overrides))
    return out


@pytest.mark.parametrize("where,overrides", readme_commands())
def test_every_readme_command_composes_as_written(where, overrides):
    # a key that exists only with another lm=/program= than the command chooses fails here (e.g. a GGUF path
    # without lm=embedded)
    try:
        compose_config(*overrides)
    except Exception as exc:  # noqa: BLE001 - the message is the point
        pytest.fail(f"{where}: python main.py {' '.join(overrides)}: {type(exc).__name__}: {exc}")


def test_the_issue_hint_is_caught():
    # The hint that sent users into a Hydra error: the key is lm.client.model_path.
    assert problem("lm.model_path", "...") is not None
    assert problem("lm.client.model_path", "...") is None
    assert problem("lm", "gemnii") is not None and problem("lm", "gemini") is None
    assert problem("lm.client.vertexai", "true") is None  # exists with lm=gemini only


def test_hints_are_found():
    found = {(k, v) for _, k, v in source_hints()}
    assert ("lm.client.model_path", "...") in found and ("run.resume", "restart") in found
    assert len(readme_hints()) > 20


@pytest.mark.parametrize("where,key,value", source_hints() + readme_hints())
def test_every_suggested_override_exists(where, key, value):
    assert problem(key, value) is None, f"{where}: {problem(key, value)}"
