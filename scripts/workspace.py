"""What the repository holds: its distributions, their versions and internal pins.

Every release script imports this module, so the list of distributions and the
rules about them live in one place.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Dependency order: each distribution comes after everything it depends on.
DISTRIBUTION_DIRS = (
    "packages/tensor",
    "packages/autograd",
    "packages/nn",
    "packages/gpu",
    "packages/onnx",
    "packages/viz",
    "examples",
    "packages/asgrad",
)

# The meta-distribution holds no code; every other one has one leaf package.
META_DISTRIBUTION = "asgrad"

VERSION_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"((a|b|rc)(0|[1-9]\d*))?(\.post(0|[1-9]\d*))?(\.dev(0|[1-9]\d*))?$"
)

# A quoted requirement on an asgrad distribution, with a version specifier:
# `"asgrad-nn==0.1.0"` or `"asgrad-examples[gpu] >= 0.1 ; python_version>'3'"`.
# bump_version.py rewrites these; a bare name such as "asgrad contributors" is
# left alone.
INTERNAL_REQUIREMENT = re.compile(
    r"""(?P<quote>["'])(?P<name>asgrad(?:-[a-z]+)?)\s*(?P<extras>\[[^\]]*\])?"""
    r"""\s*(?P<spec>(?:==|>=|<=|~=|!=|<|>)[^"';]*)(?P<rest>[^"']*)(?P=quote)"""
)

# The name at the start of a requirement string (PEP 508).
REQUIREMENT_NAME = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<rest>.*)$")
REQUIREMENT_SPEC = re.compile(r"^(?:\[[^\]]*\])?\s*(?P<spec>[^;]*)")


@dataclass(frozen=True)
class Distribution:
    """One distribution of the repository, read from its pyproject.toml."""

    directory: Path
    name: str
    version: str
    requirements: tuple[str, ...]

    @property
    def pyproject(self) -> Path:
        return self.directory / "pyproject.toml"

    @property
    def leaf_package(self) -> str | None:
        """`asgrad.tensor` for `asgrad-tensor`; None for the meta-distribution."""
        if self.name == META_DISTRIBUTION:
            return None
        return "asgrad." + self.name.removeprefix("asgrad-")

    @property
    def leaf_directory(self) -> Path | None:
        leaf = self.leaf_package
        if leaf is None:
            return None
        return self.directory / "src" / Path(*leaf.split("."))


# `__version__ = "0.1.0"` in a leaf package's __init__.py, where there is one.
DUNDER_VERSION_LINE = re.compile(r'^__version__\s*=\s*"(?P<version>[^"]*)"\s*$', re.MULTILINE)


def dunder_version_files(dist: Distribution) -> list[Path]:
    """The leaf package's __init__.py when it spells out `__version__`."""
    leaf = dist.leaf_directory
    if leaf is None or not (leaf / "__init__.py").exists():
        return []
    init = leaf / "__init__.py"
    return [init] if DUNDER_VERSION_LINE.search(init.read_text(encoding="utf-8")) else []


def read_toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        return tomllib.load(file)


def load_distribution(directory: Path) -> Distribution:
    project = read_toml(directory / "pyproject.toml")["project"]
    requirements: list[str] = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return Distribution(
        directory=directory,
        name=str(project["name"]),
        version=str(project["version"]),
        requirements=tuple(requirements),
    )


def load_distributions(root: Path = ROOT) -> list[Distribution]:
    return [load_distribution(root / directory) for directory in DISTRIBUTION_DIRS]


def find_pyprojects(root: Path = ROOT) -> list[Path]:
    """Every distribution pyproject.toml on disk, listed in DISTRIBUTION_DIRS or not."""
    found = sorted(root.glob("packages/*/pyproject.toml"))
    if (root / "examples" / "pyproject.toml").exists():
        found.append(root / "examples" / "pyproject.toml")
    return found


def is_internal(name: str) -> bool:
    return name == META_DISTRIBUTION or name.startswith(META_DISTRIBUTION + "-")


def internal_requirement(requirement: str) -> tuple[str, str] | None:
    """`("asgrad-nn", "==0.1.0")` for `"asgrad-nn==0.1.0"`; None for third parties."""
    match = REQUIREMENT_NAME.match(requirement)
    if match is None:
        return None
    name = match["name"].lower().replace("_", "-").replace(".", "-")
    if not is_internal(name):
        return None
    spec_match = REQUIREMENT_SPEC.match(match["rest"])
    spec = spec_match["spec"] if spec_match else ""
    return name, spec.replace(" ", "")
