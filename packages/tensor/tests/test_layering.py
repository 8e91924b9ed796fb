"""The tensor package is the bottom layer: its sources and tests use no higher package.

``asgrad.tensor`` must not import (or name in code) ``asgrad.autograd``,
``asgrad.nn``, ``asgrad.gpu`` or ``asgrad.examples``; backends plug in through the
``asgrad.backends`` entry point group instead. Tests that need a higher package
live with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
HIGHER = ("asgrad.autograd", "asgrad.nn", "asgrad.gpu", "asgrad.examples")


def _files() -> list[Path]:
    """Every source and test file, but this one (which names the higher packages)."""
    files = [*(PACKAGE / "src").rglob("*.py"), *(PACKAGE / "tests").rglob("*.py")]
    return sorted(f for f in files if f != Path(__file__).resolve())


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _higher_names(path: Path) -> list[str]:
    """Imports of a higher package, and (in code) strings naming one."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        ):
            names = [node.value]
        found += [
            f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}: {name}"
            for name in names
            if any(name == h or name.startswith(h + ".") for h in HIGHER)
        ]
    return found


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_higher_package_is_used(path: Path) -> None:
    assert _higher_names(path) == []
