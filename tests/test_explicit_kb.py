"""The knowledge base is passed explicitly (issue 27, item 3): only the command entry points load it.

A function that takes ``kb=None`` and loads the default knowledge base itself answers from a different KB
than its caller's whenever the caller's is not the default (``kb validate DIR``, a test's reduced tables),
and hides which code reads which table.  The checks read the syntax tree, so they hold for code added later.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from conftest import SKILL, parsed

PACKAGE = SKILL / "scripts" / "memtune"
# Where loading is allowed: the command entry points, which load it once and pass it on.
LOADERS = ("commands/", "cli.py")


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), parsed(path)


def _is_knowledge_param(arg: ast.arg) -> bool:
    return arg.arg == "kb" or (arg.annotation is not None and "Knowledge" in ast.unparse(arg.annotation))


def optional_kb_params(name: str, tree: ast.Module) -> list[str]:
    """Parameters holding a knowledge base that may be left out (a default) or may be None (the annotation)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        a = node.args
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for arg, default in [*zip(positional, defaults, strict=True), *zip(a.kwonlyargs, a.kw_defaults, strict=True)]:
            annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if _is_knowledge_param(arg) and (default is not None or "None" in annotation or "Optional" in annotation):
                found.append(f"{name}:{node.lineno} {getattr(node, 'name', 'lambda')}({arg.arg})")
    return found


def _load_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the knowledge module and to its ``load`` function by this module's imports."""
    modules, loads = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            for alias in node.names:
                if alias.name == "knowledge":  # from . import knowledge, from memtune import knowledge
                    modules.add(alias.asname or alias.name)
                elif alias.name == "load" and source.split(".")[-1] == "knowledge":
                    loads.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.endswith(".knowledge"):
                    modules.add(alias.asname or alias.name)
    return modules, loads


def knowledge_loads(name: str, tree: ast.Module) -> list[str]:
    """Calls of ``knowledge.load`` (under any name an import gave it), module-level globals included."""
    modules, loads = _load_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "load" and ast.unparse(func.value) in modules) or (
                isinstance(func, ast.Name) and func.id in loads):
            found.append(f"{name}:{node.lineno} {ast.unparse(func)}()")
    return found


def test_no_function_takes_an_optional_knowledge_base():
    found = [hit for name, tree in _modules() for hit in optional_kb_params(name, tree)]
    assert not found, f"kb must be a required parameter (the caller passes the one it loaded): {found}"


def test_only_the_command_entry_points_load_the_knowledge_base():
    found = [hit for name, tree in _modules() if not name.startswith(LOADERS) for hit in knowledge_loads(name, tree)]
    assert not found, f"knowledge.load() outside commands/ and cli.py (take kb as a parameter instead): {found}"


def test_the_checks_see_what_they_look_for():
    """Each check finds the pattern it forbids, so a quiet pass means the package has none."""
    bad = ast.parse(
        "from .. import knowledge as k\n"
        "from ..knowledge import load\n"
        "KB = k.load()\n"
        "def a(x, kb=None): return load()\n"
        "def b(x, *, kb: Knowledge | None = None): ...\n"
        "def c(x, store: 'Knowledge | None'): ...\n"
        "def d(x, kb: Knowledge): ...\n")
    assert [h.split()[1] for h in optional_kb_params("bad.py", bad)] == ["a(kb)", "b(kb)", "c(store)"]
    assert knowledge_loads("bad.py", bad) == ["bad.py:3 k.load()", "bad.py:4 load()"]
    assert Path(PACKAGE / "commands").is_dir() and (PACKAGE / "cli.py").is_file()
