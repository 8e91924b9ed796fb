"""The layering holds: imports go down, never up or sideways, between distributions and
between the subpackages of ``asgrad.tensor`` and ``asgrad.gpu``; and no import cycle spans
more than a handful of modules.

Distributions: ``tensor <- autograd <- nn <- examples``; ``gpu``, ``onnx`` and ``viz``
depend on ``tensor`` (and ``viz`` optionally on ``gpu``). No package imports another's
private (``_``-prefixed) module, and the core never names a higher package, not even in a
string: backends plug in through the ``asgrad.backends`` entry point. Tests follow the same
directions: what needs two packages is tested with the higher one (or here, at the root).
The walk reads every import statement and every string handed to
``importlib.import_module`` in ``packages/*/src`` and ``packages/*/tests``.

Subpackages: :data:`TENSOR_LAYERS` and :data:`GPU_LAYERS` say what each may import when it
is imported (module-level imports; an import under ``if TYPE_CHECKING:`` is an annotation
and counts nowhere). An import inside a function runs when the function is called: it may
go against the layering only where :data:`LAZY_UPWARD` lists it, with its reason.

Cycles: the strongly connected components of the graph of module-level imports of every
``asgrad`` source module have at most :data:`MAX_CYCLE` modules; with the imports inside
functions counted too, at most :data:`MAX_CYCLE_WITH_LAZY`.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

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

# Subpackage (or root module) of asgrad.tensor -> what it may import at import time, within
# asgrad.tensor (itself included). Root modules not listed (``__init__``) may import all.
TENSOR_LAYERS: dict[str, frozenset[str]] = {
    "errors": frozenset({"errors"}),
    "ir": frozenset({"errors", "ir"}),
    "ops": frozenset({"errors", "ir", "ops"}),
    "api": frozenset({"errors", "ir", "ops", "api"}),
    "io": frozenset({"errors", "ir", "loops", "io"}),  # a graph file holds loop bodies
    "loops": frozenset({"errors", "ir", "api", "loops"}),
    "runtime": frozenset({"errors", "ir", "api", "runtime"}),
    "cpu": frozenset({"errors", "ir", "ops", "loops", "runtime", "cpu"}),
    "linalg": frozenset({"errors", "ir", "ops", "api", "linalg"}),
}
# The same for asgrad.gpu; its root modules (backend, selection, cli, coverage, __main__)
# are its front: they may import any of it.
GPU_LAYERS: dict[str, frozenset[str]] = {
    "errors": frozenset({"errors"}),
    "device": frozenset({"errors", "device"}),
    "lowering": frozenset({"errors", "device", "lowering"}),
    "plan": frozenset({"errors", "device", "lowering", "plan"}),
}
LAYERS = {"asgrad.tensor": TENSOR_LAYERS, "asgrad.gpu": GPU_LAYERS}

# (importing module, imported module) -> why it imports against the layering, inside a
# function (so not when it is imported).
LAZY_UPWARD: dict[tuple[str, str], str] = {
    ("asgrad.tensor.ops.control", "asgrad.tensor.loops"): "scan's test cases trace loop bodies",
    ("asgrad.tensor.runtime.backends", "asgrad.tensor.cpu"): "the built-in backend, on demand",
    ("asgrad.gpu.lowering.control", "asgrad.gpu.plan"): "a loop body is planned as a program",
    ("asgrad.gpu.lowering.control", "asgrad.gpu.plan.fusion"): "a loop body's fused kernels",
}
MAX_CYCLE = 5
MAX_CYCLE_WITH_LAZY = 5


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
        "from asgrad.tensor.ops import elementwise\n"
        "importlib.import_module('asgrad.gpu')\n",
        encoding="utf-8",
    )
    assert list(imported_modules(source)) == [
        (2, "asgrad.tensor.ops"),
        (2, "asgrad.tensor.ops.elementwise"),
        (3, "asgrad.gpu"),
    ]


# -- the core names no higher package -------------------------------------------------------
HIGHER = ("asgrad.autograd", "asgrad.nn", "asgrad.gpu", "asgrad.examples")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def higher_names(path: Path) -> list[str]:
    """Strings in code (not docstrings) that are a module of a package above tensor."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and any(node.value == h or node.value.startswith(h + ".") for h in HIGHER)
    ]


def test_the_core_never_names_a_higher_package() -> None:
    found = [
        name
        for tree in TREES["tensor"]
        for p in sorted(tree.rglob("*.py"))
        for name in higher_names(p)
    ]
    assert found == []


def test_the_core_never_names_the_gpu_package() -> None:
    # Not even inside a string: the GPU backend is found through its entry point.
    for path in sorted((ROOT / "packages/tensor/src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "asgrad.gpu" not in node.value, f"{path.relative_to(ROOT)}:{node.lineno}"


# -- the module import graph ----------------------------------------------------------------
def _source_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in sorted(ROOT.glob("packages/*/src/asgrad/**/*.py")):
        parts = path.parts
        name = ".".join(parts[parts.index("src") + 1 :]).removesuffix(".py")
        modules[name.removesuffix(".__init__")] = path
    return modules


MODULES = _source_modules()


def _resolve(name: str) -> str | None:
    """The source module ``name`` is, or is an attribute of."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(module: str, path: Path | None = None) -> Iterator[tuple[int, str, bool]]:
    """``(line, imported module, lazy)`` for the asgrad imports of a source module (read
    from ``path``, by default its file); lazy imports are inside a function; those under
    ``if TYPE_CHECKING:`` are left out."""
    path = path or MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[int, str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from walk(ast.Module(body=child.orelse, type_ignores=[]), lazy)
                continue
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            names: list[str] = []
            line = getattr(child, "lineno", 0)
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{a.name}" for a in child.names]
            for name in names:
                target = _resolve(name)
                if target is not None and target != module:
                    yield line, target, inner
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)


def _layer(module: str) -> tuple[str, str] | None:
    """``(package, subpackage or root module)`` of a module of asgrad.tensor or asgrad.gpu."""
    for package in LAYERS:
        if module.startswith(package + "."):
            return package, module[len(package) + 1 :].split(".")[0]
    return None


def layering_violations() -> list[str]:
    found = []
    for module in MODULES:
        layer = _layer(module)
        if layer is None:
            continue
        package, part = layer
        allowed = LAYERS[package].get(part)
        if allowed is None:  # the package's front: anything of it
            continue
        for line, target, lazy in _imports_of(module):
            if not target.startswith(package):
                continue
            if target == package:
                found.append(f"{module}:{line} imports {package} itself (import a submodule)")
                continue
            target_part = target[len(package) + 1 :].split(".")[0]
            if target_part in allowed:
                continue
            if lazy and _listed_upward(module, target):
                continue
            how = "inside a function" if lazy else "at import"
            found.append(f"{module}:{line} imports {target} {how} ({part} may not)")
    return found


def test_subpackages_import_only_what_their_layer_may() -> None:
    assert layering_violations() == []


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found, key=lambda c: (-len(c), c))


def _listed_upward(module: str, target: str) -> bool:
    return any(module == m and (target == t or target.startswith(t + ".")) for m, t in LAZY_UPWARD)


@functools.cache
def _imports_of(module: str) -> tuple[tuple[int, str, bool], ...]:
    return tuple(module_imports(module))


def import_graph(*, lazy: bool) -> dict[str, set[str]]:
    """Module-level imports; with ``lazy``, those inside functions too, but for the upward
    ones :data:`LAZY_UPWARD` lists (each of them closes a cycle by design: a loop body
    is planned by the planner that lowers the loop)."""
    return {
        m: {
            t
            for _, t, is_lazy in _imports_of(m)
            if not is_lazy or (lazy and not _listed_upward(m, t))
        }
        for m in MODULES
    }


def test_no_import_cycle_spans_more_than_a_handful_of_modules() -> None:
    cycles = strongly_connected(import_graph(lazy=False))
    assert [c for c in cycles if len(c) > MAX_CYCLE] == []


def test_no_cycle_spans_more_than_a_handful_of_modules_counting_lazy_imports() -> None:
    cycles = strongly_connected(import_graph(lazy=True))
    assert [c for c in cycles if len(c) > MAX_CYCLE_WITH_LAZY] == []


def test_the_walk_tells_lazy_imports_and_skips_annotations(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from asgrad.tensor.ir.graph import Graph\n"
        "from . import passes\n"
        "if TYPE_CHECKING:\n"
        "    from asgrad.tensor.api.tensor import Tensor\n"
        "def f():\n"
        "    from asgrad.tensor.io import printing\n",
        encoding="utf-8",
    )
    assert list(module_imports("asgrad.tensor.ir.example", source)) == [
        (2, "asgrad.tensor.ir.graph", False),
        (3, "asgrad.tensor.ir.passes", False),
        (7, "asgrad.tensor.io.printing", True),
    ]


def test_the_cycle_check_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(edges) == [["a", "b", "c"]]


def test_every_listed_lazy_import_is_still_made() -> None:
    made = {
        (m, t)
        for m in MODULES
        for _, target, lazy in _imports_of(m)
        for t in {target, target.rpartition(".")[0]}
        if lazy and (m, t) in LAZY_UPWARD
    }
    assert sorted(set(LAZY_UPWARD) - made) == []
