"""Layers point one way: library code (common/, lms/, retrieval/, tasks/, signatures/, reports/) never imports the
programs, the optimizers or the runners; programs never import optimizers, runners or serving; serving and runners
do not import each other
(runners/serve.py builds the app: the one place that joins them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "common": ("runners", "programs", "serving", "optimizers"),
    "lms": ("runners", "programs", "serving", "optimizers"),
    "retrieval": ("runners", "programs", "serving", "optimizers"),
    "tasks": ("runners", "programs", "serving", "optimizers"),
    "signatures": ("runners", "programs", "serving", "optimizers"),
    "programs": ("runners", "serving", "optimizers"),  # a program loads its state (common/program_state.py) itself
    "optimizers": ("runners", "serving"),
    "serving": ("runners", "programs"),
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(package):
    bad = [f"{path.relative_to(ROOT)} imports {name}" for path in sorted((ROOT / package).rglob("*.py"))
           for name in sorted(imports(path)) if name.split(".")[0] in FORBIDDEN[package]]
    assert not bad, bad


def test_serving_names_no_program():
    text = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "serving").rglob("*.py")).lower()
    assert not [name for name in ("archehr", "mediqa") if name in text]
