"""Run the flagship example: the Transformer block once it exists, else XOR.

`hatch run demo` calls this, so the README's demo command never needs to change
when a bigger example lands. It first says what the example shows and how long it
takes, since the transformer trains for about a minute before it prints anything else.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys

# (module, what a run shows and how long it takes). The transformer's 800 steps took 55 s
# on this project's 2-core development machine with its cores free
# (docs/tutorials/transformer.md); `time hatch run demo` took 5 min 17 s there on
# 2026-12-01 with the cores shared (load average 7), the same losses and sample.
PREFERRED_EXAMPLES = (
    (
        "asgrad.examples.transformer",
        "trains a character-level transformer language model for 800 steps (the default)"
        " on the CPU, then prints its train and validation loss next to a unigram baseline,"
        " a text sample and one JSON line of results. It takes about a minute on 2 free CPU"
        " cores, up to 5 minutes on a busy machine (--steps 100 or --time-limit 10 for a"
        " shorter run; --quiet hides the progress bar)",
    ),
    (
        "asgrad.examples.xor",
        "trains a two-layer perceptron on XOR until its loss is below 1e-3 and prints one"
        " JSON line of results; it takes a few seconds",
    ),
)


def main() -> int:
    for module, shows in PREFERRED_EXAMPLES:
        if importlib.util.find_spec(module) is not None:
            print(f"running python -m {module}: it " + shows)
            print("", flush=True)
            sys.argv = [module, *sys.argv[1:]]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
    tried = ", ".join(module for module, _ in PREFERRED_EXAMPLES)
    print("no example found; tried: " + tried, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
