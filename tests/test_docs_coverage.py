"""Every distribution appears in the docs site: API reference and installation page.

A new distribution (a pyproject.toml under packages/ or examples/) fails these
tests until its package has an API page in mkdocs.yml's nav, mkdocstrings can find
its sources, and docs/installation.md's table has its row.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mkdocs.utils.yaml import yaml_load

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from workspace import Distribution, find_pyprojects, load_distribution  # noqa: E402

DISTRIBUTIONS = [load_distribution(pyproject.parent) for pyproject in find_pyprojects()]
LEAVES = [dist for dist in DISTRIBUTIONS if dist.leaf_package is not None]


def load_mkdocs_config() -> dict[str, Any]:
    with (ROOT / "mkdocs.yml").open("rb") as file:
        return yaml_load(file)


def nav_pages(nav: Any) -> set[str]:
    """The Markdown files that a nav (nested lists and mappings) lists."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(nav_pages(entry) for entry in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(nav_pages(value) for value in nav.values())) if nav else set()
    return set()


def mkdocstrings_paths(config: dict[str, Any]) -> list[str]:
    for entry in config["plugins"]:
        if isinstance(entry, dict) and "mkdocstrings" in entry:
            paths: list[str] = entry["mkdocstrings"]["handlers"]["python"]["paths"]
            return paths
    raise AssertionError("mkdocs.yml configures no mkdocstrings plugin")


def test_the_distributions_are_found() -> None:
    names = {dist.name for dist in DISTRIBUTIONS}
    assert {"asgrad", "asgrad-tensor", "asgrad-nn"} <= names


@pytest.mark.parametrize("dist", LEAVES, ids=lambda dist: dist.name)
def test_each_package_has_an_api_page_in_the_nav(dist: Distribution) -> None:
    config = load_mkdocs_config()
    leaf = dist.leaf_package
    assert leaf is not None
    page = f"api/{leaf.removeprefix('asgrad.')}.md"
    source = ROOT / "docs" / page
    assert source.is_file(), f"{dist.name}: no API page docs/{page}"
    assert f"::: {leaf}" in source.read_text(encoding="utf-8"), f"docs/{page} lacks ::: {leaf}"
    assert page in nav_pages(config["nav"]), f"docs/{page} is not in mkdocs.yml's nav"
    src = (dist.directory / "src").relative_to(ROOT).as_posix()
    assert src in mkdocstrings_paths(config), f"mkdocstrings' paths lack {src}"


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=lambda dist: dist.name)
def test_each_distribution_has_a_row_on_the_installation_page(dist: Distribution) -> None:
    rows = [
        line
        for line in (ROOT / "docs" / "installation.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{dist.name}` |")
    ]
    assert len(rows) == 1, f"docs/installation.md: {len(rows)} table rows for {dist.name}"
