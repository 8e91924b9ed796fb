"""The compiled CPU kernels against the numpy path, op by op, at the workloads' shapes.

    python benchmarks/jit_kernels.py [--rounds 30]

For each op below, times the compiled kernel that the op's lowering chooses
(``asgrad.tensor.cpu.lowering.resolve(op).compiled``: a structural family's kernel, or
the loop rendered from an elementwise op's expression) and what the numpy path runs
for it (the op's float32 ``into`` path where it has one, else its kernel; ``out=`` a
buffer either way), alternating the two, and prints the best time of each (float32,
one thread); and the compiled kernel written over its first input (``out=`` that
input, as the executor's memory plan does when the input dies there).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np


def _cases(rng: np.random.Generator) -> list[tuple[str, list[np.ndarray], dict[str, Any]]]:
    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    pool = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
    ln = {"normalized_shape": (128,), "eps": 1e-5}
    return [
        ("gelu", [f(16, 64, 512)], {"approximate": "none"}),
        ("gelu_backward", [f(16, 64, 512) * 1e-3, f(16, 64, 512)], {"approximate": "none"}),
        ("sigmoid", [f(16, 64, 512)], {}),
        ("silu", [f(16, 64, 512)], {}),
        ("leaky_relu", [f(16, 64, 512)], {"alpha": 0.01}),
        ("softmax", [f(16, 4, 64, 64)], {"axis": -1}),
        ("log_softmax", [f(1024, 64)], {"axis": -1}),
        ("layer_norm", [f(16, 64, 128), f(128), f(128)], ln),
        ("layer_norm_backward", [f(16, 64, 128), f(16, 64, 128), f(128)], ln),
        ("scatter_add", [f(16, 64, 128), rng.integers(0, 64, (16, 64)), f(64, 128)], {"axis": 0}),
        ("adam_ema", [f(128, 512), f(128, 512)], {"beta": 0.999, "square": True}),
        (
            "adam_update",
            [
                f(128, 512),
                f(128, 512),
                np.abs(f(128, 512)),
                np.asarray(1e-3, np.float32),
                np.asarray(0.5, np.float32),
            ],
            {"eps": 1e-8},
        ),
        ("max_pool2d_backward", [f(32, 16, 14, 14), f(32, 16, 28, 28)], pool),
    ]


def _numpy_path(name: str, args: Sequence[np.ndarray], attrs: dict[str, Any]) -> Callable[[], Any]:
    from asgrad.tensor import get_op

    op = get_op(name)
    expected = op.kernel(*args, **attrs)
    out = np.empty_like(expected)
    if op.into is not None:
        fn = op.into.fn
        work = {"work": tuple(np.empty_like(out) for _ in range(op.into.work))}
        extra = work if op.into.work else {}
        return lambda: fn(*args, out=out, **extra, **attrs)
    if op.writes_out:
        return lambda: op.kernel(*args, out=out, **attrs)
    return lambda: op.kernel(*args, **attrs)


def _compiled(
    name: str, args: Sequence[Any], attrs: dict[str, Any], *, over: bool = False
) -> Callable[[], Any]:
    from asgrad.tensor import Graph, get_op
    from asgrad.tensor.cpu.lowering import resolve
    from asgrad.tensor.ir.registry import TensorType

    g = Graph()
    xs = [g.input(f"x{i}", np.shape(a), np.asarray(a).dtype.name) for i, a in enumerate(args)]
    node = g.apply(name, xs, attrs).node
    choose = resolve(get_op(name)).compiled
    types = [TensorType(np.shape(a), np.asarray(a).dtype.name) for a in args]
    entry = None if choose is None else choose(node, types, node.type)
    if entry is None:
        raise SystemExit(f"{name}: no compiled kernel at these types")
    fn = entry.load()
    out = np.empty_like(fn(*args, **attrs))
    if over and entry.leading and np.shape(args[0]) == out.shape:
        given = [np.array(a, copy=True) for a in args]
        return lambda: fn(*given, out=given[0], **attrs)
    return lambda: fn(*args, out=out, **attrs)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args(argv)

    print(
        f"{'op':24s} {'shape':22s} {'numpy ms':>9s} {'compiled ms':>12s} {'speed-up':>9s}"
        f" {'over input ms':>14s}"
    )
    for name, inputs, attrs in _cases(np.random.default_rng(0)):
        runs = {
            "numpy": _numpy_path(name, inputs, attrs),
            "compiled": _compiled(name, inputs, attrs),
            "over": _compiled(name, inputs, attrs, over=True),
        }
        best = {k: float("inf") for k in runs}
        for run in runs.values():
            run()  # compile / warm up
        for _ in range(args.rounds):
            for k, run in runs.items():
                start = time.perf_counter()
                run()
                best[k] = min(best[k], time.perf_counter() - start)
        shape = "x".join(map(str, inputs[0].shape))
        print(
            f"{name:24s} {shape:22s} {best['numpy'] * 1e3:9.3f} {best['compiled'] * 1e3:12.3f}"
            f" {best['numpy'] / best['compiled']:8.2f}x {best['over'] * 1e3:14.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
