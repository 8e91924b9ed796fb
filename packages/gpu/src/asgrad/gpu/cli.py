"""Command line of ``python -m asgrad.gpu``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from asgrad.gpu.errors import GpuUnavailableError

__all__ = ["main"]


def _info(as_json: bool) -> int:
    from asgrad.gpu.device import get_device

    try:
        caps = get_device().capabilities
    except GpuUnavailableError as exc:
        print(f"no GPU: {exc}", file=sys.stderr)
        return 1
    print(caps.to_json() if as_json else caps.format())
    return 0


def _coverage(as_json: bool) -> int:
    from asgrad.gpu.coverage import coverage_json, coverage_markdown

    print(coverage_json() if as_json else coverage_markdown())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m asgrad.gpu")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print the adapter's capability record")
    info.add_argument("--json", action="store_true")
    cov = sub.add_parser(
        "coverage", help="print every op's GPU lowering, WGSL files and parity cases"
    )
    cov.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info(args.json)
    return _coverage(args.json)
