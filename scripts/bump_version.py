"""Set one new version on every distribution and every internal pin at once.

Usage: python scripts/bump_version.py NEW_VERSION [--root PATH]

Rewrites `version = "..."` in each distribution's pyproject.toml and every
requirement on an asgrad distribution (`asgrad-tensor==OLD`) to `==NEW_VERSION`,
and any `__version__ = "..."` line of a leaf package's __init__.py, keeping
the rest of each file byte for byte. Then runs the same checks as
scripts/check_versions.py.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from check_versions import find_problems
from workspace import (
    DUNDER_VERSION_LINE,
    INTERNAL_REQUIREMENT,
    ROOT,
    VERSION_PATTERN,
    dunder_version_files,
    load_distributions,
)

PROJECT_VERSION_LINE = re.compile(r'^version\s*=\s*"[^"]*"\s*$', re.MULTILINE)


def rewrite_pyproject(text: str, new_version: str) -> str:
    """Return `text` with the project version and every internal pin set."""
    text, count = PROJECT_VERSION_LINE.subn(f'version = "{new_version}"', text, count=1)
    if count != 1:
        raise ValueError('no `version = "..."` line found')

    def repin(match: re.Match[str]) -> str:
        quote, name, extras = match["quote"], match["name"], match["extras"] or ""
        return f"{quote}{name}{extras}=={new_version}{match['rest']}{quote}"

    return INTERNAL_REQUIREMENT.sub(repin, text)


def bump(root: Path, new_version: str) -> list[Path]:
    if not VERSION_PATTERN.match(new_version):
        raise ValueError(f"{new_version!r} is not a version like 1.2.3, 1.2.3rc1")
    changed: list[Path] = []
    for dist in load_distributions(root):
        old = dist.pyproject.read_text(encoding="utf-8")
        new = rewrite_pyproject(old, new_version)
        if new != old:
            dist.pyproject.write_text(new, encoding="utf-8")
            changed.append(dist.pyproject)
        for init in dunder_version_files(dist):
            old = init.read_text(encoding="utf-8")
            new = DUNDER_VERSION_LINE.sub(f'__version__ = "{new_version}"', old, count=1)
            if new != old:
                init.write_text(new, encoding="utf-8")
                changed.append(init)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new_version", help="for example 0.2.0 or 0.2.0rc1")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    try:
        changed = bump(root, args.new_version)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"rewrote {path.relative_to(root)}")
    problems = find_problems(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
