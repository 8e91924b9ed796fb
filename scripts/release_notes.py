"""Print the CHANGELOG.md section of one version, for a release's notes.

Usage: python scripts/release_notes.py VERSION [--changelog PATH]

VERSION may carry a leading `v` (a tag name). Exits 1 when the section is
missing or lists no change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from changelog import has_entries, section_body
from workspace import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="for example 0.1.0, v0.1.0 or Unreleased")
    parser.add_argument("--changelog", type=Path, default=ROOT / "CHANGELOG.md")
    args = parser.parse_args(argv)
    version: str = args.version.removeprefix("v")

    body = section_body(args.changelog.read_text(encoding="utf-8"), version)
    if body is None:
        print(f"error: {args.changelog} has no `## [{version}]` section", file=sys.stderr)
        return 1
    if not has_entries(body):
        print(f"error: the `## [{version}]` section lists no change", file=sys.stderr)
        return 1
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
