"""Imports point one way: common <- signatures / lms / retrieval / tasks <- programs <- optimizers <- runners <- main.py,
with serving and reports beside runners (runners/serve.py builds the app: the one place that joins them); no
package is allowed an exception, and no module imports itself back through others (no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("signatures", "lms", "retrieval", "tasks")
ABOVE_LIBRARIES = ("programs", "optimizers", "runners", "serving", "reports")
FORBIDDEN = {
    "common": (*LIBRARIES, *ABOVE_LIBRARIES),
    **{lib: (*(other for other in LIBRARIES if other != lib), *ABOVE_LIBRARIES) for lib in LIBRARIES},
    "programs": ("optimizers", "runners", "serving", "reports"),  # a program loads its state (common/) itself
    "optimizers": ("runners", "serving", "reports"),
    "reports": ("runners", "serving"),
    "serving": ("runners", "programs", "optimizers", "reports"),
}
PACKAGES = (*FORBIDDEN, "runners")


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


def module_graph() -> dict[str, set[str]]:
    """Each module of ours (`package.module`) -> the modules of ours it imports (a submodule import counts as the
    submodule, a name from a package as that package's __init__)."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    modules["main"] = ROOT / "main.py"

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {ours(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {ours(f"{node.module}.{alias.name}") for alias in node.names}
        graph[name] = found - {None, name}
    return graph


def test_no_module_imports_itself_back_through_others():
    graph = module_graph()
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_tests_and_benchmarks_import_nothing_of_each_other():
    """A benchmark is not a library of the tests, nor the tests of a benchmark: what both need is in the packages
    (tasks/archehr/fabrications.py)."""
    bad = [f"{path.relative_to(ROOT)} imports {name}"
           for folder, other in (("tests", "benchmarks"), ("benchmarks", "tests"))
           for path in sorted((ROOT / folder).rglob("*.py"))
           for name in sorted(imports(path)) if name.split(".")[0] == other]
    assert not bad, bad
