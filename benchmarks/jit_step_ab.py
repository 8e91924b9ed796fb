"""A workload's CPU training step with the compiled kernels on and off, in one process.

    python benchmarks/jit_step_ab.py transformer [--rounds 20] [--threads 2]

Builds the workload twice (``asgrad.tensor.cpu.jit.set_enabled(True)``, then
``False``), warms both up, then alternates their steps so that both see the same
machine load; prints each one's fastest and median step and the speed-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    import numpy as np

    import asgrad_workloads
    from asgrad.tensor.cpu import jit

    workloads = {}
    for on in (True, False):
        jit.set_enabled(on)
        start = time.perf_counter()
        w = asgrad_workloads.build(args.workload, "cpu")
        w.step()
        first = time.perf_counter() - start
        print(f"compiled path {'on ' if on else 'off'}: first step {first:.2f} s")
        for _ in range(3):
            w.step()
        workloads[on] = w
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for on, w in workloads.items():
            jit.set_enabled(on)  # the switch is part of each program's function key
            start = time.perf_counter()
            w.step()
            times[on].append(time.perf_counter() - start)
    for on in (True, False):
        t = np.array(times[on]) * 1e3
        label = "on " if on else "off"
        print(f"compiled path {label}: fastest {t.min():.2f} ms, median {np.median(t):.2f} ms")
    fastest = min(times[False]) / min(times[True])
    median = float(np.median(times[False]) / np.median(times[True]))
    print(f"speed-up: {fastest:.2f}x (fastest), {median:.2f}x (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
