"""Time to the compiled CPU step: cold (empty cache) and warm, per workload.

Runs each workload in a fresh process twice with one ``ASGRAD_CACHE_DIR``: first
empty (cold: Numba compiles), then filled (warm: machine code loaded from disk). Each
process times building and compiling the program plus the first three steps (the
whole step of a small training graph is compiled on its first call) and reports
whether the step runs compiled whole.

    python benchmarks/cpu_compile_time.py --workloads xor,mlp
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, "benchmarks")
import asgrad_workloads as w
wl = w.build(sys.argv[1], "cpu")
for _ in range(3):
    wl.step()
elapsed = time.perf_counter() - t0
fn = wl.program.executable.function(wl.feeds)
active = bool(getattr(fn, "whole_step_active", lambda: False)())
print(json.dumps({"seconds": elapsed, "whole_step": active}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="xor,mlp")
    args = parser.parse_args()
    for name in args.workloads.split(","):
        with tempfile.TemporaryDirectory() as cache:
            # compiled from the first step (the tiered default would run numpy first)
            env = {**os.environ, "ASGRAD_CACHE_DIR": cache, "ASGRAD_CPU_JIT": "1"}
            runs = []
            for label in ("cold", "warm"):
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, name],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.append((label, json.loads(out.stdout.strip().splitlines()[-1])))
        for label, r in runs:
            print(
                f"{name:12s} {label}: {r['seconds']:.2f} s to the end of step 3"
                f" (whole step: {r['whole_step']})"
            )


if __name__ == "__main__":
    main()
