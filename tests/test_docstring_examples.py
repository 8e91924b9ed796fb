"""Every `>>>` example in the docstrings of asgrad's modules runs and prints what it says.

Docstrings are the API reference the docs site renders (mkdocstrings), so their
examples are checked like the pages' code blocks are.
"""

from __future__ import annotations

import doctest
import importlib
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


def examples_in(module: ModuleType) -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [test for test in finder.find(module, module.__name__) if test.examples]


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
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {name}"
