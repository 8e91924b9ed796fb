"""Fail when any distribution's version or internal pin is out of step.

Usage: python scripts/check_versions.py [--root PATH]

Checks, for every distribution of the repository:
- all versions are equal and valid (PEP 440, release segment X.Y.Z), and so is
  any `__version__ = "..."` line in a leaf package's __init__.py;
- every requirement on another asgrad distribution is an exact `==VERSION` pin;
- every pyproject.toml under packages/ (and examples/) is a known distribution,
  and every distribution is a member of the Hatch workspace;
- each distribution ships the root LICENSE unchanged;
- each leaf package has `py.typed` and no `asgrad/__init__.py` exists (PEP 420).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workspace import (
    DISTRIBUTION_DIRS,
    DUNDER_VERSION_LINE,
    ROOT,
    VERSION_PATTERN,
    dunder_version_files,
    find_pyprojects,
    internal_requirement,
    load_distributions,
    read_toml,
)


def workspace_members(root: Path) -> set[str]:
    default_env = read_toml(root / "pyproject.toml")["tool"]["hatch"]["envs"]["default"]
    members: set[str] = set()
    for member in default_env["workspace"]["members"]:
        members.add(member if isinstance(member, str) else member["path"])
    return members


def find_problems(root: Path) -> list[str]:
    problems: list[str] = []
    distributions = load_distributions(root)
    versions = {dist.version for dist in distributions}
    expected = distributions[0].version

    if len(versions) != 1:
        listing = ", ".join(f"{d.name}={d.version}" for d in distributions)
        problems.append(f"versions differ: {listing}")
    for dist in distributions:
        if not VERSION_PATTERN.match(dist.version):
            problems.append(f"{dist.name}: version {dist.version!r} is not X.Y.Z[...]")
        for requirement in dist.requirements:
            internal = internal_requirement(requirement)
            if internal is None:
                continue
            name, spec = internal
            if spec != f"=={expected}":
                problems.append(
                    f"{dist.name}: requirement {requirement!r} must pin {name}=={expected} exactly"
                )

        for init in dunder_version_files(dist):
            match = DUNDER_VERSION_LINE.search(init.read_text(encoding="utf-8"))
            if match is not None and match["version"] != expected:
                problems.append(
                    f"{init.relative_to(root)}: __version__ = {match['version']!r}, "
                    f"expected {expected!r} (scripts/bump_version.py rewrites it)"
                )

    known = {(root / directory / "pyproject.toml").resolve() for directory in DISTRIBUTION_DIRS}
    for pyproject in find_pyprojects(root):
        if pyproject.resolve() not in known:
            problems.append(
                f"{pyproject.relative_to(root)} is not listed in scripts/workspace.py "
                "DISTRIBUTION_DIRS"
            )
    members = workspace_members(root)
    for directory in DISTRIBUTION_DIRS:
        if directory not in members:
            problems.append(f"{directory} is not a Hatch workspace member in pyproject.toml")

    license_text = (root / "LICENSE").read_bytes()
    for dist in distributions:
        shipped = dist.directory / "LICENSE"
        if not shipped.exists() or shipped.read_bytes() != license_text:
            problems.append(f"{shipped.relative_to(root)} must be a copy of the root LICENSE")
        leaf = dist.leaf_directory
        if leaf is not None and not (leaf / "py.typed").exists():
            problems.append(f"{(leaf / 'py.typed').relative_to(root)} is missing")
        namespace_init = dist.directory / "src" / "asgrad" / "__init__.py"
        if namespace_init.exists():
            problems.append(
                f"{namespace_init.relative_to(root)} must not exist: asgrad is a "
                "PEP 420 namespace shared by several distributions"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()

    problems = find_problems(root)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    distributions = load_distributions(root)
    print(f"ok: {len(distributions)} distributions at version {distributions[0].version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
