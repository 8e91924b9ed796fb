"""The compiled direct convolutions at the cnn workload's shapes: time and GFLOP/s.

    python benchmarks/conv_kernels.py [--rounds 40] [--threads 1] [--base TREE]

Times each direct kernel (`asgrad.tensor.cpu.jit.kernels_conv`: the forward with bias
and ReLU, the input gradient, the weight gradient) at the cnn workload's two layers
(float32, batch 32) and prints the best of ``--rounds`` rounds of 10 calls, by CPU
time on one thread (wall time with more). With ``--base`` (the root of another
checkout of this repository), that tree's ``kernels_conv.py`` and ``conv_source.py``
are imported beside this one's and both run alternated in the same process, so that
both see the same machine load; the results' largest relative difference is printed
too. Set ``ASGRAD_CACHE_DIR`` to a folder of its own (the generated kernels are
compiled there on the first run).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  # after the thread counts are set

JIT = "packages/tensor/src/asgrad/tensor/cpu/jit"


def _load_base(root: Path) -> Any:
    """The other tree's ``kernels_conv`` module, importing its own ``conv_source``."""
    names = {"conv_source": "_base_conv_source", "kernels_conv": "_base_kernels_conv"}
    for name, alias in names.items():
        text = (root / JIT / f"{name}.py").read_text()
        text = text.replace("asgrad.tensor.cpu.jit.conv_source", names["conv_source"])
        spec = importlib.util.spec_from_loader(alias, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__file__ = str(root / JIT / f"{name}.py")
        sys.modules[alias] = module
        exec(compile(text, module.__file__, "exec"), module.__dict__)
    return sys.modules[names["kernels_conv"]]


def _cases(kc: Any) -> list[tuple[str, float, Callable[[], np.ndarray]]]:
    rng = np.random.default_rng(0)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    a = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    x1, w1, b1, g1 = f(32, 1, 28, 28), f(16, 1, 3, 3), f(16), f(32, 16, 28, 28)
    x2, w2, b2, g2 = f(32, 16, 14, 14), f(32, 16, 3, 3), f(32), f(32, 32, 14, 14)
    o = [np.empty(s, np.float32) for s in [g1.shape, g2.shape, x2.shape, w1.shape, w2.shape]]
    fl1, fl2 = 2.0 * 32 * 16 * 28 * 28 * 9, 2.0 * 32 * 32 * 14 * 14 * 16 * 9
    return [
        ("conv2d 1->16 28x28", fl1, lambda: kc.conv2d_direct(x1, w1, b1, out=o[0], relu=True, **a)),
        (
            "conv2d 16->32 14x14",
            fl2,
            lambda: kc.conv2d_direct(x2, w2, b2, out=o[1], relu=True, **a),
        ),
        (
            "backward_input 32->16 14x14",
            fl2,
            lambda: kc.conv2d_backward_input_direct(g2, w2, x2, out=o[2], **a),
        ),
        (
            "backward_weight 16x1x3x3",
            fl1,
            lambda: kc.conv2d_backward_weight_direct(x1, g1, out=o[3], kernel_size=3, **a),
        ),
        (
            "backward_weight 32x16x3x3",
            fl2,
            lambda: kc.conv2d_backward_weight_direct(x2, g2, out=o[4], kernel_size=3, **a),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--base", type=Path, help="another checkout's root: its kernels alongside")
    args = p.parse_args(argv)

    import numba

    from asgrad.tensor.cpu.jit import kernels_conv

    numba.set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    trees = {"this": _cases(kernels_conv)}
    if args.base is not None:
        trees = {"base": _cases(_load_base(args.base.resolve())), **trees}
    first = {t: [fn().copy() for _, _, fn in cases] for t, cases in trees.items()}
    best = {t: [float("inf")] * len(cases) for t, cases in trees.items()}
    for _ in range(args.rounds):
        for t, cases in trees.items():
            for i, (_, _, fn) in enumerate(cases):
                start = clock()
                for _ in range(10):
                    fn()
                best[t][i] = min(best[t][i], (clock() - start) / 10)
    for i, (name, flops, _) in enumerate(trees["this"]):
        cells = [
            f"{t} {best[t][i] * 1e3:6.3f} ms {flops / best[t][i] / 1e9:5.1f} GFLOP/s" for t in trees
        ]
        line = f"{name:28s} " + " | ".join(cells)
        if "base" in trees:
            ref, got = first["base"][i], first["this"][i]
            diff = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
            line += f" | x{best['base'][i] / best['this'][i]:.2f}, rel. diff {diff:.1e}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
