"""The layering of the distributions holds: imports go down, never up or sideways.

``tensor <- autograd <- nn <- examples``; ``gpu`` and ``onnx`` depend on ``tensor`` only. No
package imports another's private (``_``-prefixed) module, and the core never names a
backend: backends plug in through the ``asgrad.backends`` entry point. Tests follow
the same directions: what needs two packages is tested with the higher one (or here,
at the root). The walk reads every import statement and every string handed to
``importlib.import_module`` in ``packages/*/src`` and ``packages/*/tests``.

Files stay small, too: no source file is over :data:`MAX_LINES` lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 420

# package -> the asgrad packages it may import (itself included)
ALLOWED: dict[str, frozenset[str]] = {
    "tensor": frozenset({"tensor"}),
    "autograd": frozenset({"tensor", "autograd"}),
    "nn": frozenset({"tensor", "autograd", "nn"}),
    "gpu": frozenset({"tensor", "gpu"}),
    "examples": frozenset({"tensor", "autograd", "nn", "gpu", "examples", "onnx"}),
    "onnx": frozenset({"tensor", "onnx"}),
    "viz": frozenset({"tensor", "gpu", "viz"}),  # gpu: optional, for fusion groups
}
TREES: dict[str, tuple[Path, ...]] = {
    "tensor": (ROOT / "packages/tensor/src", ROOT / "packages/tensor/tests"),
    "autograd": (ROOT / "packages/autograd/src", ROOT / "packages/autograd/tests"),
    "nn": (ROOT / "packages/nn/src", ROOT / "packages/nn/tests"),
    "gpu": (ROOT / "packages/gpu/src", ROOT / "packages/gpu/tests"),
    "examples": (ROOT / "examples/src", ROOT / "examples/tests"),
    "onnx": (ROOT / "packages/onnx/src", ROOT / "packages/onnx/tests"),
    "viz": (ROOT / "packages/viz/src", ROOT / "packages/viz/tests"),
}


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every ``asgrad.*`` module that ``path`` imports."""
    for line, module in _imports(path):
        if module.startswith("asgrad."):
            yield line, module


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # `from asgrad.tensor import _private`
                yield node.lineno, f"{node.module}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def violations(package: str) -> list[str]:
    found: list[str] = []
    for tree in TREES[package]:
        for path in sorted(tree.rglob("*.py")):
            where = path.relative_to(ROOT)
            for line, module in imported_modules(path):
                parts = module.split(".")
                target = parts[1]
                if target not in ALLOWED[package]:
                    found.append(f"{where}:{line} imports {module} ({package} may not)")
                elif target != package and any(p.startswith("_") for p in parts[2:]):
                    found.append(f"{where}:{line} imports {module}, private to {target}")
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_follow_the_layering(package: str) -> None:
    assert violations(package) == []


def test_the_walk_sees_a_wrong_direction(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text(
        "import importlib\n"
        "from asgrad.tensor.ops import _common\n"
        "importlib.import_module('asgrad.gpu')\n",
        encoding="utf-8",
    )
    assert list(imported_modules(source)) == [
        (2, "asgrad.tensor.ops"),
        (2, "asgrad.tensor.ir.common"),
        (3, "asgrad.gpu"),
    ]


def test_the_core_never_names_a_backend_package() -> None:
    # Not even as a string: the GPU backend is found through its entry point.
    for path in sorted((ROOT / "packages/tensor/src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "asgrad.gpu" not in node.value, f"{path.relative_to(ROOT)}:{node.lineno}"


def test_source_files_stay_small() -> None:
    large = []
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            large.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert large == [], f"split these by concern (limit {MAX_LINES} lines): {large}"
