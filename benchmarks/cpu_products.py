"""transformer_large's 2-D matrix products on the CPU: numpy's OpenBLAS, the same products
as tiles over BLAS's threads, and PyTorch's.

    python benchmarks/cpu_products.py [--rounds 9] [--tiles] [--torch]
    python benchmarks/cpu_products.py --torch-profile [--steps 3]

For each 2-D product of a transformer_large step (batch 32 x 256 tokens, width 512,
feed-forward 2048, the output head's 256), with the operands laid out as the compiled
step has them (``tn``: the first operand a transposed view, as in a weight gradient;
``nt``: the second, as in an input gradient), times ``np.matmul`` into a preallocated
result (BLAS's own threads share each product: ``OPENBLAS_NUM_THREADS``) and prints its
median time and TFLOP/s.

``--tiles``: also runs each product as one `gemm_batch` call over a grid of tiles of the
result (``rows x columns`` tiles, each tile's product on one of BLAS's threads, the
route `asgrad.tensor.cpu.jit.batched_matmul` takes for the attention's batches), for a
few grids, and says whether the tiles gave ``np.matmul``'s bits. ``--torch``: also times
``torch.matmul`` on the same operands (``torch.set_num_threads`` to
``OMP_NUM_THREADS``, else the cores). ``--torch-profile``: PyTorch's own profile of
``--steps`` transformer_large training steps (``benchmarks/torch_workloads.py``, after two
untimed ones), its operators by their own CPU time.

Import order matters as in an asgrad program: asgrad before numpy, so that OpenBLAS's
idle threads stop polling soon after a product (``asgrad.tensor._openblas``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (name, m, k, n, layout): the products of a transformer_large step.
PRODUCTS = (
    ("qkv", 8192, 512, 1536, "nn"),
    ("ff1", 8192, 512, 2048, "nn"),
    ("ff2", 8192, 2048, 512, "nn"),
    ("proj", 8192, 512, 512, "nn"),
    ("head", 8192, 512, 256, "nn"),
    ("dW ff1", 512, 8192, 2048, "tn"),
    ("dW ff2", 2048, 8192, 512, "tn"),
    ("dX ff1", 8192, 2048, 512, "nt"),
    ("dX ff2", 8192, 512, 2048, "nt"),
)
GRIDS = ((16, 1), (32, 1), (64, 1), (1, 16), (1, 32), (4, 4), (8, 4), (4, 8), (8, 8), (16, 4))


def _threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)


def operands(m: int, k: int, n: int, layout: str, seed: int = 0) -> tuple[Any, Any]:
    """float32 operands of an ``m x k`` by ``k x n`` product, a transposed view where
    ``layout`` says ``t``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if layout[0] == "t" else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if layout[1] == "t" else (k, n), dtype=np.float32)
    return (a.T if layout[0] == "t" else a), (b.T if layout[1] == "t" else b)


def tiles(a: Any, b: Any, out: Any, rows: int, cols: int) -> tuple[Any, Any, Any]:
    """``a``, ``b`` and ``out`` as stacks ``[rows, cols]`` of the tiles of a ``rows x
    cols`` grid over the result (views: a tile's rows of ``a``, columns of ``b``)."""
    from numpy.lib.stride_tricks import as_strided

    (m, k), n = a.shape, b.shape[1]
    tm, tn = m // rows, n // cols
    (ar, ac), (br, bc), (orow, ocol) = a.strides, b.strides, out.strides
    return (
        as_strided(a, (rows, cols, tm, k), (ar * tm, 0, ar, ac), writeable=False),
        as_strided(b, (rows, cols, k, tn), (0, bc * tn, br, bc), writeable=False),
        as_strided(out, (rows, cols, tm, tn), (orow * tm, ocol * tn, orow, ocol)),
    )


def median_ms(fn: Callable[[], Any], rounds: int) -> float:
    """The median time of ``rounds`` calls of ``fn`` in ms, after two untimed ones."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[rounds // 2] * 1e3


def products(rounds: int, with_tiles: bool, with_torch: bool) -> None:
    import numpy as np

    from asgrad.tensor.cpu.jit.batched_matmul import gemm_batch

    torch = None
    if with_torch:
        torch = importlib.import_module("torch")
        torch.set_num_threads(_threads())
    for name, m, k, n, layout in PRODUCTS:
        a, b = operands(m, k, n, layout)
        ref = np.empty((m, n), np.float32)
        gflop = 2 * m * k * n / 1e9
        ms = median_ms(lambda a=a, b=b, ref=ref: np.matmul(a, b, out=ref), rounds)
        row = [f"{name:7s} {m}x{k}x{n} {layout}: np.matmul {ms:6.2f} ms {gflop / ms:5.2f} TFLOP/s"]
        if with_tiles:
            for rows, cols in GRIDS:
                if m % rows or n % cols:
                    continue
                out = np.empty((m, n), np.float32)
                ta, tb, to = tiles(a, b, out, rows, cols)
                if not gemm_batch(ta, tb, to):
                    row.append(f"{rows}x{cols} declined")
                    continue
                same = "" if np.array_equal(out, ref) else " (other bits)"
                t = median_ms(lambda ta=ta, tb=tb, to=to: gemm_batch(ta, tb, to), rounds)
                row.append(f"tiles {rows}x{cols} {t:6.2f}{same}")
        if torch is not None:
            ta = torch.from_numpy(np.ascontiguousarray(a.T)).T if layout[0] == "t" else None
            tb = torch.from_numpy(np.ascontiguousarray(b.T)).T if layout[1] == "t" else None
            ta = torch.from_numpy(a) if ta is None else ta
            tb = torch.from_numpy(b) if tb is None else tb
            t = median_ms(lambda ta=ta, tb=tb: torch.matmul(ta, tb), rounds)
            row.append(f"torch {t:6.2f} ms {gflop / t:5.2f} TFLOP/s")
        print(" | ".join(row), flush=True)


def torch_profile(steps: int) -> None:
    import torch_workloads

    profiler = importlib.import_module("torch.profiler")
    step, _, _ = torch_workloads.build("transformer_large", "cpu", _threads())
    for _ in range(2):
        step()
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    print(f"PyTorch, transformer_large, {steps} steps, {_threads()} threads:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--tiles", action="store_true", help="also as tiles over gemm_batch")
    p.add_argument("--torch", action="store_true", help="also torch.matmul")
    p.add_argument("--torch-profile", action="store_true", help="PyTorch's step profile only")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args(argv)
    importlib.import_module("asgrad.tensor")  # before numpy: see the module docstring
    if args.torch_profile:
        torch_profile(args.steps)
    else:
        products(args.rounds, args.tiles, args.torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
