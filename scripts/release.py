"""Prepare a release, or check that a tag may be released.

Usage:
  python scripts/release.py prepare NEW_VERSION [--date YYYY-MM-DD] [--root PATH]
      Refuses an empty `## [Unreleased]` section; sets NEW_VERSION on every
      distribution and internal pin; turns `## [Unreleased]` into
      `## [NEW_VERSION] - DATE` under a fresh, empty `## [Unreleased]`.
      Commit the result, then tag it `vNEW_VERSION`.
  python scripts/release.py check --tag vX.Y.Z [--root PATH]
      Refuses a tag that differs from the distributions' version, versions or
      pins out of step, and a CHANGELOG.md without entries for that version.
      The release workflow runs this before it builds anything.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from bump_version import bump
from changelog import UNRELEASED, has_entries, roll_unreleased, section_body
from check_versions import find_problems
from workspace import ROOT, load_distributions


class ReleaseError(Exception):
    """A release step refused to go on; the message says why and what to do."""


def prepare(root: Path, new_version: str, date: str) -> None:
    changelog_path = root / "CHANGELOG.md"
    text = changelog_path.read_text(encoding="utf-8")
    body = section_body(text, UNRELEASED)
    if body is None or not has_entries(body):
        raise ReleaseError(
            "CHANGELOG.md: the `## [Unreleased]` section lists no change; "
            "add what this release brings before preparing it"
        )
    if section_body(text, new_version) is not None:
        raise ReleaseError(f"CHANGELOG.md already has a `## [{new_version}]` section")
    try:
        bump(root, new_version)
    except ValueError as error:
        raise ReleaseError(str(error)) from error
    changelog_path.write_text(roll_unreleased(text, new_version, date), encoding="utf-8")
    problems = find_problems(root)
    if problems:
        raise ReleaseError("; ".join(problems))


def check(root: Path, tag: str) -> str:
    problems = find_problems(root)
    if problems:
        raise ReleaseError("; ".join(problems))
    version = load_distributions(root)[0].version
    if tag != f"v{version}":
        raise ReleaseError(
            f"tag {tag!r} differs from the distributions' version {version!r}: "
            f"tag the commit v{version}, or run `release.py prepare` for a new version"
        )
    body = section_body((root / "CHANGELOG.md").read_text(encoding="utf-8"), version)
    if body is None or not has_entries(body):
        raise ReleaseError(
            f"CHANGELOG.md has no entries under `## [{version}]`: "
            "run `release.py prepare` before tagging"
        )
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser("prepare", help="bump and roll the changelog")
    prepare_parser.add_argument("new_version")
    prepare_parser.add_argument(
        "--date", default=datetime.date.today().isoformat(), help="release date"
    )
    check_parser = commands.add_parser("check", help="check a tag before releasing")
    check_parser.add_argument("--tag", required=True, help="for example v0.1.0")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()

    try:
        if args.command == "prepare":
            prepare(root, args.new_version, args.date)
            print(f"prepared {args.new_version}: commit, then tag v{args.new_version}")
        else:
            version = check(root, args.tag)
            print(f"ok: {args.tag} releases version {version}")
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
