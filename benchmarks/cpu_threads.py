"""The compiled CPU kernels' serial form against their parallel form, by size and threads.

    python benchmarks/cpu_threads.py [--rounds 20] [--sizes 16k,128k,512k,4M] [--ops gelu,softmax]

For each rendered kernel of ``benchmarks/jit_kernels.py``'s list (the elementwise
loops and the row kernels: the hand-written family kernels have no parallel form),
with its inputs grown or shrunk along the leading axis to about each size (elements
of the result), times the serial form and the parallel form (`asgrad.tensor.cpu.jit.threads`)
at 1, 2 and N threads (N: ``NUMBA_NUM_THREADS``), each into a fresh buffer and
written over its first input, alternating the variants round by round, and prints the
best (``--median``: the median) time of each and the parallel forms' speed-up over the
serial one. Also prints Numba's threading layer and the load average (a loaded machine
gives the threads less than it seems). BLAS runs single-threaded here (``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from jit_kernels import _cases, _compiled


def _size(text: str) -> int:
    scale = {"k": 1024, "m": 1024 * 1024}.get(text[-1].lower(), 1)
    return int(float(text.rstrip("kKmM")) * scale)


def _resized(inputs: Sequence[np.ndarray], size: int, rng: np.random.Generator) -> list[Any]:
    """``inputs`` with each one of the first input's shape grown or shrunk along its
    leading axis so that it has about ``size`` elements (the others as they are)."""
    shape = inputs[0].shape
    rest = math.prod(shape[1:])
    lead = max(1, round(size / rest))
    out: list[Any] = []
    for a in inputs:
        if a.shape == shape:
            b = rng.standard_normal((lead, *shape[1:])).astype(a.dtype)
            out.append(np.abs(b) if (a >= 0).all() else b)
        else:
            out.append(a)
    return out


def _variants(
    name: str, inputs: list[Any], attrs: dict[str, Any], most: int
) -> dict[str, Callable[[], Any]]:
    """Each form, fresh and over its first input: a call setting the form first."""
    import numba

    runs: dict[str, Callable[[], Any]] = {}
    for over in (False, True):
        call = _compiled(name, inputs, attrs, over=over)
        module = sys.modules[_module_of(call)]
        counts = sorted({1, min(2, most), most})
        for label, n in [("serial", 0), *((f"par{n}", n) for n in counts)]:

            def run(call: Callable[[], Any] = call, module: Any = module, n: int = n) -> Any:
                module._site.force = "parallel" if n else "serial"
                numba.set_num_threads(max(n, 1))
                return call()

            runs[f"{label}{'/over' if over else ''}"] = run
    return runs


def _module_of(call: Callable[[], Any]) -> str:
    """The generated module of the kernel a `_compiled` call runs."""
    for cell in call.__closure__ or ():
        fn = cell.cell_contents
        if callable(fn) and getattr(fn, "__module__", "").startswith("asgrad_"):
            return str(fn.__module__)
    raise SystemExit("a hand-written kernel")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--sizes", default="16k,128k,512k,4M")
    p.add_argument("--median", action="store_true", help="the median time, not the best")
    p.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    args = p.parse_args(argv)
    import numba

    from asgrad.tensor.cpu.jit import threads  # noqa: F401  # sets Numba's cache up

    most = int(numba.config.NUMBA_NUM_THREADS)
    sizes = [_size(s) for s in args.sizes.split(",")]
    wanted = set(filter(None, args.ops.split(",")))
    rng = np.random.default_rng(0)
    print(
        f"Numba {numba.__version__}, NUMBA_NUM_THREADS={most}, threading layer: ",
        end="",
        flush=True,
    )
    header = None
    skipped: list[str] = []
    for name, inputs, attrs in _cases(np.random.default_rng(0)):
        if wanted and name not in wanted:
            continue
        try:
            _module_of(_compiled(name, inputs, attrs))
        except SystemExit as exc:
            skipped.append(f"{name} ({exc})")
            continue
        for size in sizes:
            given = _resized(inputs, size, rng)
            runs = _variants(name, given, attrs, most)
            for run in runs.values():
                run()  # compile / warm up
            if header is None:
                print(numba.threading_layer())
                print(f"load average at start: {os.getloadavg()}")
                header = f"{'op':22s} {'elements':>9s} " + " ".join(f"{k:>12s}" for k in runs)
                stat = "median" if args.median else "best"
                print(f"{header}   ({stat} ms; x: serial / parallel, same output)")
            times: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(args.rounds):
                for k, run in runs.items():
                    start = time.perf_counter()
                    run()
                    times[k].append(time.perf_counter() - start)
            pick = statistics.median if args.median else min
            best = {k: pick(t) for k, t in times.items()}
            cells = []
            for k, t in best.items():
                base = best["serial/over" if k.endswith("/over") else "serial"]
                ratio = "" if k.startswith("serial") else f" {base / t:4.2f}x"
                cells.append(f"{t * 1e3:7.3f}{ratio}".rjust(12))
            elements = math.prod(np.shape(given[0]))
            print(f"{name:22s} {elements:9d} " + " ".join(cells))
    print(f"no parallel form: {', '.join(skipped)}")
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
