"""``python -m asgrad.viz FILE``: open the viewer on a saved graph file.

python -m asgrad.viz graph.json [--out page.html] [--no-open]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from asgrad.tensor.errors import AsgradError
from asgrad.viz import show


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m asgrad.viz", description="Open the asgrad graph viewer on a graph file."
    )
    parser.add_argument("file", help="a graph file written by Graph.save")
    parser.add_argument("--out", help="where to write the HTML page (default: a temporary file)")
    parser.add_argument("--no-open", action="store_true", help="write the page, do not open it")
    args = parser.parse_args(argv)
    try:
        path = show(args.file, args.out, open_browser=not args.no_open)
    except AsgradError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
