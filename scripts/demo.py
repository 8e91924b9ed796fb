"""Run the flagship example: the Transformer block once it exists, else XOR.

`hatch run demo` calls this, so the README's demo command never needs to change
when a bigger example lands.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys

PREFERRED_EXAMPLES = ("asgrad.examples.transformer", "asgrad.examples.xor")


def main() -> int:
    for module in PREFERRED_EXAMPLES:
        if importlib.util.find_spec(module) is not None:
            print(f"running python -m {module}", flush=True)
            sys.argv = [module, *sys.argv[1:]]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
    print("no example found; tried: " + ", ".join(PREFERRED_EXAMPLES), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
