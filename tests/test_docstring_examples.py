"""Every `>>>` example in the docstrings of asgrad's modules runs and prints what it says.

Docstrings are the API reference the docs site renders (mkdocstrings), so their
examples are checked like the pages' code blocks are.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import itertools
import os
import pkgutil
from types import ModuleType

import pytest

LEAF_PACKAGES = (
    "asgrad.tensor",
    "asgrad.autograd",
    "asgrad.nn",
    "asgrad.gpu",
    "asgrad.examples",
    "asgrad.onnx",
    "asgrad.viz",
    "asgrad.examples",
)


REQUIRES_GPU = doctest.register_optionflag("REQUIRES_GPU")
"""``# doctest: +REQUIRES_GPU`` on any example of a docstring: its examples need a GPU
adapter. Without one they are skipped, and the test says so (a skip, not a pass); under
``ASGRAD_REQUIRE_GPU=1`` (CI, which has lavapipe) a missing adapter fails the test."""


def needs_gpu(test: doctest.DocTest) -> bool:
    return any(example.options.get(REQUIRES_GPU) for example in test.examples)


def gpu_present() -> bool:
    try:
        from asgrad.gpu import gpu_available
    except ImportError:
        return False
    return gpu_available()


def module_names() -> list[str]:
    names: list[str] = []
    for package_name in LEAF_PACKAGES:
        try:
            package = importlib.import_module(package_name)
        except ImportError:
            continue
        names.append(package_name)
        for info in pkgutil.walk_packages(package.__path__, prefix=package_name + "."):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                names.append(info.name)
    return sorted(names)


def attribute_docstrings(module: ModuleType) -> list[tuple[str, int, str]]:
    """(name, line, text) of each attribute docstring in module's source.

    An attribute docstring is a string statement after an assignment (``clip = clamp``
    then ``\"\"\"...\"\"\"``), at module or class level or in ``__init__``: the API
    reference renders it (griffe reads it), but Python keeps no ``__doc__`` of it, so
    doctest misses it.
    """
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):  # no source (a compiled or namespace module)
        return []
    found: list[tuple[str, int, str]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for before, stmt in itertools.pairwise(body):
            if (
                isinstance(before, ast.Assign | ast.AnnAssign)
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                targets = before.targets if isinstance(before, ast.Assign) else [before.target]
                name = ast.unparse(targets[0])
                found.append((f"{prefix}{name}", stmt.lineno, stmt.value.value))
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                visit(stmt.body, prefix)  # ``self.x = ...`` then its docstring

    visit(tree.body, f"{module.__name__}.")
    return found


def examples_in(module: ModuleType) -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = [test for test in finder.find(module, module.__name__) if test.examples]
    parser = doctest.DocTestParser()
    filename = getattr(module, "__file__", None)
    for name, line, text in attribute_docstrings(module):
        test = parser.get_doctest(text, dict(vars(module)), name, filename, line)
        if test.examples:
            tests.append(test)
    return tests


def modules_with_examples() -> list[str]:
    """Modules whose docstrings hold examples, plus those that fail to import."""
    selected: list[str] = []
    for name in module_names():
        try:
            module = importlib.import_module(name)
        except Exception:  # reported by the test itself, with its traceback
            selected.append(name)
            continue
        if examples_in(module):
            selected.append(name)
    return selected


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    tests = examples_in(module)
    gpu_tests = [test.name for test in tests if needs_gpu(test)]
    skipped: list[str] = []
    if gpu_tests and not gpu_present():
        if os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0"):
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter for {gpu_tests}")
        skipped = gpu_tests
        tests = [test for test in tests if test.name not in skipped]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {name}"
    if skipped:
        pytest.skip(f"no GPU adapter: the examples of {skipped} did not run")


def test_examples_of_attribute_docstrings_are_collected() -> None:
    """An alias's docstring (a string after ``bitwise_and = __and__``) is run too."""
    module = importlib.import_module("asgrad.tensor.api.methods_math")
    names = {test.name for test in examples_in(module)}
    assert "asgrad.tensor.api.methods_math.MathMethods.bitwise_and" in names
