"""No module of lib/ or handlers/ uses another module's private (`_name`) names: what a module
keeps private may change without telling anyone, so nobody outside may lean on it."""

from __future__ import annotations

import ast

from tests.support.paths import REPO

FIRST_PARTY = ("lib", "handlers", "app", "migrate")


def private(name: str) -> bool:
    """`_name` (not a dunder such as `__all__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def borrowed_private_names(source: str) -> list[str]:
    """The private names `source` takes from Ash's other modules: `from lib.x import _y`, and
    `x._y` where `x` was imported from lib or handlers (a module, a class, a function).
    Third-party names are not judged here (os._exit is the standard library's public API)."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in FIRST_PARTY:
            for alias in node.names:
                if private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                imported.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FIRST_PARTY:
                    imported.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in imported:
                found.append((node.lineno, ast.unparse(node)))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_no_module_borrows_another_modules_private_names():
    modules = sorted([*(REPO / "lib").rglob("*.py"), *(REPO / "handlers").rglob("*.py")])
    assert len(modules) > 100
    borrowed = {
        str(path.relative_to(REPO)): found
        for path in modules
        if (found := borrowed_private_names(path.read_text(encoding="utf-8")))
    }
    assert borrowed == {}


def test_the_check_sees_each_kind_of_borrowing():
    source = """
from lib.agent.steps import _as_data, show_call
from lib.memory import store
import lib.sandbox.container as container
import lib.db

store._entry({})
container._SHARED.clear()
lib.db._connections
show_call._cache
os._exit(1)
self._mine
"""
    assert borrowed_private_names(source) == [
        "line 2: from lib.agent.steps import _as_data",
        "line 7: store._entry",
        "line 8: container._SHARED",
        "line 9: lib.db._connections",
        "line 10: show_call._cache",
    ]
