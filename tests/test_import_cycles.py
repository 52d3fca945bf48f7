"""No two modules of the package import each other, directly or around a circle (issue 27, item 3).

A circle makes the import order matter (one of the two sees the other half-initialised) and says that what
both need lives in the wrong place.  The graph is read from the syntax tree: ``from X import Y`` depends on X
(its namespace is read), and on X.Y too when that is a module; ``if TYPE_CHECKING:`` imports never run and do
not count.  The module-level graph is the import-time one; the full graph adds the imports deferred into
functions, which hide a circle without removing it (pipeline <-> simulate and planner <-> planner.search did).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import SKILL, parsed

SCRIPTS = SKILL / "scripts"
PACKAGE = SCRIPTS / "memtune"


def module_names(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.Module, module_level: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run: at module level (in if/try blocks too), or anywhere."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.orelse)
            elif module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue  # runs when called, not when imported (a class body does run at import time)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.stmt)] + [
                            s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])

    visit(tree.body)
    return out


def import_graph(modules: dict[str, tuple[Path, bool]], module_level: bool) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in _imports(parsed(path), module_level):
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            deps.add(source)
            deps.update(f"{source}.{alias.name}" for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


@pytest.mark.parametrize("module_level", [True, False], ids=["module-level", "with-deferred-imports"])
def test_no_import_cycle(module_level):
    found = cycles(import_graph(module_names(), module_level))
    assert not found, f"modules that import each other (move what both need to a module both may import): {found}"


def test_the_check_finds_a_cycle(tmp_path):
    """A package built to hold the two circles this check was written for: both are found, with their kinds."""
    pkg = tmp_path / "memtune"
    (pkg / "planner").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "pipeline.py": "from .engine import x\ndef run():\n    from .simulate import simulate\n",
        "simulate.py": "def f():\n    from .pipeline import ARCHITECTURE_FIELDS\n",
        "engine.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .pipeline import run\n",
        "planner/__init__.py": "def __getattr__(name):\n    from . import search\n",
        "planner/search.py": "from . import costs as cost_model\n",
        "planner/costs.py": "try:\n    from ..engine import x\nexcept ImportError:\n    pass\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    modules = module_names(pkg)
    assert cycles(import_graph(modules, module_level=True)) == []
    assert cycles(import_graph(modules, module_level=False)) == [
        ["memtune.pipeline", "memtune.simulate"], ["memtune.planner", "memtune.planner.search"]]
    assert import_graph(modules, module_level=True)["memtune.planner.costs"] == {"memtune.engine"}
