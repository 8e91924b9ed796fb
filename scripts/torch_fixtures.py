"""Write PyTorch's answers for the cross-check tests as fixtures (``tests/data/torch/``).

Run by hand where PyTorch is installed next to asgrad's development environment::

    python scripts/torch_fixtures.py                  # every test that uses torch_reference
    python scripts/torch_fixtures.py --out /tmp/fx    # somewhere else
    python scripts/torch_fixtures.py packages/nn/tests/test_losses.py   # some tests only

It runs pytest on the tests that use the ``torch_reference`` fixture (the root
``conftest.py``) with ``ASGRAD_TORCH_FIXTURES=write``: each call of the fixture runs PyTorch
and saves its inputs, its outputs and the shape of its result, one compressed ``.npz`` per
test folder, merged into what is there. The tests still assert against what PyTorch
returned, so a run that passes wrote fixtures that asgrad matches. Commit the files; CI
compares against them without PyTorch.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "tests" / "data" / "torch",
        help="the folder of the .npz files (default: tests/data/torch)",
    )
    parser.add_argument("tests", nargs="*", help="test files or ids (default: all)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("error: PyTorch does not import here: pip install torch", file=sys.stderr)
        return 2
    import pytest

    print(f"PyTorch {torch.__version__}; writing fixtures to {args.out}")
    os.environ["ASGRAD_TORCH_FIXTURES"] = "write"
    os.environ["ASGRAD_TORCH_FIXTURES_OUT"] = str(args.out.resolve())
    os.chdir(ROOT)
    # one process: the fixtures are gathered and written at the end of the session
    return int(pytest.main(["-p", "no:xdist", "-q", "-m", "", *args.tests]))


if __name__ == "__main__":
    sys.exit(main())
