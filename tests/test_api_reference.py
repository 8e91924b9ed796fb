"""The API reference documents every public name, and its cross-references are links.

What mkdocstrings renders is what griffe reads from the sources (statically: a
docstring set at run time does not count), so these tests ask griffe, as the docs
build does: every public member of `Tensor` (its mixins' included) and every name in
the `__all__` of each module the API pages render has a docstring; no docstring holds
a Sphinx role (`:class:` and the like render as literal text, mkdocstrings links with
``[`name`][asgrad.full.path]``). The docs build fails on a role that reaches a page
anyway (the hook scripts/docs_roles_check.py).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import griffe
import pytest
from mkdocs.exceptions import PluginError
from mkdocs.utils.yaml import yaml_load

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import docs_roles_check  # noqa: E402  # a script, importable once scripts/ is on the path
from asgrad.tensor import Tensor  # noqa: E402

SPHINX_ROLE = re.compile(r":[a-z]+:`")

# One worker runs every test of the file, so that griffe loads the packages once (the
# module fixture), not once on each worker that gets one of the tests.
pytestmark = pytest.mark.xdist_group("api_reference")


def mkdocs_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return config


def python_handler() -> dict[str, Any]:
    for entry in mkdocs_config()["plugins"]:
        if isinstance(entry, dict) and "mkdocstrings" in entry:
            handler: dict[str, Any] = entry["mkdocstrings"]["handlers"]["python"]
            return handler
    raise AssertionError("mkdocs.yml configures no mkdocstrings plugin")


def rendered_modules() -> list[str]:
    """The modules that a `::: name` block of an API page renders."""
    names = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("::: "):
                name = line.removeprefix("::: ").strip()
                try:
                    importlib.import_module(name)
                except ImportError:  # a class or function, not a module
                    continue
                names.append(name)
    return names


@pytest.fixture(scope="module")
def objects() -> griffe.ModulesCollection:
    """Every asgrad module as griffe (and so mkdocstrings) sees it."""
    paths = [ROOT / path for path in python_handler()["paths"]]
    loader = griffe.GriffeLoader(search_paths=paths)
    loader.load("asgrad")  # the namespace package: every distribution's modules
    loader.resolve_aliases(implicit=False, external=False)
    return loader.modules_collection


def has_docstring(obj: griffe.Object | griffe.Alias) -> bool:
    return obj.docstring is not None and bool(obj.docstring.value.strip())


def test_every_public_tensor_member_has_a_docstring(objects: griffe.ModulesCollection) -> None:
    tensor = objects["asgrad.tensor.Tensor"]
    members = {name: m for name, m in tensor.all_members.items() if not name.startswith("_")}
    public = [name for name in dir(Tensor) if not name.startswith("_")]
    unseen = sorted(name for name in public if name not in members)
    assert unseen == [], f"Tensor members the docs cannot see (defined dynamically?): {unseen}"
    missing = sorted(name for name, member in members.items() if not has_docstring(member))
    assert missing == [], f"Tensor members without a docstring: {missing}"


def test_every_public_tensor_member_has_an_example(objects: griffe.ModulesCollection) -> None:
    tensor = objects["asgrad.tensor.Tensor"]
    missing = sorted(
        name
        for name, member in tensor.all_members.items()
        if not name.startswith("_") and ">>>" not in getattr(member.docstring, "value", "")
    )
    assert missing == [], f"Tensor members without an example: {missing}"


@pytest.mark.parametrize("module_name", rendered_modules())
def test_every_exported_name_has_a_docstring(
    objects: griffe.ModulesCollection, module_name: str
) -> None:
    module = importlib.import_module(module_name)
    exported = [name for name in getattr(module, "__all__", ()) if not name.startswith("__")]
    missing = [name for name in exported if not has_docstring(objects[f"{module_name}.{name}"])]
    assert missing == [], f"{module_name} exports names without a docstring: {missing}"


# Exported names that cannot have a runnable `>>>` example, with the reason beside each.
# Every other name in the `__all__` of a rendered module must show one.
NO_EXAMPLE: dict[str, str] = {}


def example_holder(objects: griffe.ModulesCollection, module_name: str, name: str) -> Any:
    """What the page renders for an export: the function itself when a same-named
    submodule hides it (it has a `:::` block of its own)."""
    seen = objects[f"{module_name}.{name}"]
    value = getattr(importlib.import_module(module_name), name)
    if seen.is_module and not inspect.ismodule(value):
        return objects[f"{value.__module__}.{value.__qualname__}"]
    return seen


@pytest.mark.parametrize("module_name", rendered_modules())
def test_every_exported_name_has_an_example(
    objects: griffe.ModulesCollection, module_name: str
) -> None:
    module = importlib.import_module(module_name)
    exported = [name for name in getattr(module, "__all__", ()) if not name.startswith("__")]
    missing = [
        name
        for name in exported
        if f"{module_name}.{name}" not in NO_EXAMPLE
        and ">>>" not in getattr(example_holder(objects, module_name, name).docstring, "value", "")
    ]
    assert missing == [], f"{module_name} exports names without an example: {missing}"


def test_the_allow_list_names_only_exports_without_an_example(
    objects: griffe.ModulesCollection,
) -> None:
    stale = []
    for path in NO_EXAMPLE:
        module_name, name = path.rsplit(".", 1)
        docstring = example_holder(objects, module_name, name).docstring
        if ">>>" in getattr(docstring, "value", ""):
            stale.append(path)
    assert stale == [], f"names on NO_EXAMPLE that have an example now: {stale}"


def test_an_export_that_a_submodule_shadows_is_rendered_by_its_own_block(
    objects: griffe.ModulesCollection,
) -> None:
    """``asgrad.autograd.grad`` is a function and a module: griffe, so the page, shows the
    module (submodules are not listed); the function needs a ``:::`` block of its own."""
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "api").glob("*.md"))
    missing = []
    for module_name in rendered_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            seen = objects[f"{module_name}.{name}"]
            if seen.is_module and not inspect.ismodule(value):
                canonical = f"{value.__module__}.{value.__qualname__}"
                if f"::: {canonical}\n" not in pages:
                    missing.append(canonical)
                elif not has_docstring(objects[canonical]):
                    missing.append(f"{canonical} (no docstring)")
    assert missing == [], f"exports hidden by a submodule, with no block of their own: {missing}"


def roles_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of each Sphinx role in the docstrings (string statements) of source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for match in SPHINX_ROLE.finditer(node.value.value):
                line = node.lineno + node.value.value.count("\n", 0, match.start())
                end = node.value.value.find("`", match.end())
                found.append((line, node.value.value[match.start() : end + 1]))
    return found


def test_the_role_check_finds_roles_in_docstrings_only() -> None:
    source = (
        'def f():\n    """Calls :func:`g`.\n\n    And [`h`][m.h]."""\n'
        '    return ":class:`message`"\n'
    )
    assert roles_in(source) == [(2, ":func:`g`")]


def test_no_docstring_holds_a_sphinx_role() -> None:
    files = sorted([*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("examples/src/**/*.py")])
    assert files
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in files
        for line, text in roles_in(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "Sphinx roles (write [`name`][asgrad.full.path]):\n" + "\n".join(found)


class _File:
    src_uri = "api/nn.md"


class _Page:
    file = _File()


def test_the_hook_fails_a_page_with_a_literal_role() -> None:
    html = "<p>Raises :class:<code>~asgrad.nn.CheckpointError</code> when</p>"
    assert docs_roles_check.literal_roles('<a href="#x"><code>Graph</code></a>') == []
    with pytest.raises(PluginError, match=r"api/nn\.md: 1 Sphinx role"):
        docs_roles_check.on_post_page(html, page=_Page())  # type: ignore[arg-type]


def test_the_site_runs_the_role_hook_and_renders_tensor_methods() -> None:
    assert "scripts/docs_roles_check.py" in mkdocs_config()["hooks"]
    page = (ROOT / "docs" / "api" / "tensor.md").read_text(encoding="utf-8")
    assert "::: asgrad.tensor.Tensor\n    options:\n      inherited_members: true" in page
