"""Batched matrix products of the transformers' attention: ``np.matmul`` against the batch
over threads (`asgrad.tensor.cpu.jit.batched_matmul`), and PyTorch's where installed.

    python benchmarks/cpu_bmm.py [--rounds 7] [--threads N]
                                 [--workloads transformer_large,transformer]
    python benchmarks/cpu_bmm.py --steps 3 [--workloads transformer]

For each workload's attention shapes (batch, heads, sequence, head size), the four
products of a forward and backward step with the operands laid out as the compiled step
has them (heads as strided views of the projections, ``k^T`` and the gradients'
transposes as transposed views), times ``np.matmul`` (BLAS's own threads over each
matrix), `gemm_batch` (one ``cblas_sgemm_batch`` call: each matrix on one of BLAS's
threads; where it applies) and ``torch.matmul`` (``torch.set_num_threads(N)``),
alternating them round by round, and prints each one's median time, GFLOP/s, and
whether the batch gave ``np.matmul``'s bits (and those of ``np.matmul`` with BLAS on
one thread, where threadpoolctl can set it). N: ``--threads``, else Numba's thread
count. BLAS runs its own thread count (``OPENBLAS_NUM_THREADS``).

``--steps S``: also times S whole compiled training steps of each workload with every
eligible product forced to ``np.matmul`` and to the batch over threads, alternating
step by step in one process (after two warm-up steps of each); ``--rounds 0`` skips the
products alone. ``--torch-steps S``
times S of PyTorch's steps of each workload instead (``benchmarks/torch_workloads.py``,
N threads; run it in a process of its own, as ``benchmarks/run.py`` does).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# asgrad before numpy, as a program importing asgrad first: asgrad may set OpenBLAS's
# settings before numpy loads OpenBLAS.
importlib.import_module("asgrad.tensor")
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = {"transformer_large": (32, 8, 256, 64), "transformer": (16, 4, 64, 32)}


def _cases(b: int, h: int, t: int, d: int, rng: np.random.Generator) -> list[tuple[str, Any, Any]]:
    def heads() -> np.ndarray:  # (b, t, h*d) -> (b, h, t, d), a strided view
        x = rng.standard_normal((b, t, h * d), dtype=np.float32)
        return x.reshape(b, t, h, d).transpose(0, 2, 1, 3)

    q, k, v, g = heads(), heads(), heads(), heads()
    p = rng.standard_normal((b, h, t, t), dtype=np.float32)
    gt = np.ascontiguousarray(g.swapaxes(-1, -2))
    return [
        ("q @ k^T", q, k.swapaxes(-1, -2)),
        ("p @ v", p, v),
        ("dout @ v^T", g, v.swapaxes(-1, -2)),
        ("dout^T @ p", gt, p),
    ]


def _time_into(fn: Callable[[], Any], times: list[float]) -> None:
    """One call of ``fn``, its time in ms appended to ``times``."""
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1e3)


def micro(name: str, rounds: int, n: int) -> None:
    from asgrad.tensor.cpu.blas import blas_threads
    from asgrad.tensor.cpu.jit.batched_matmul import gemm_batch

    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        torch = None  # type: ignore[assignment]
    control = blas_threads()
    rng = np.random.default_rng(0)
    print(f"{name}: batch, heads, seq, head size = {SHAPES[name]}; {n} threads", flush=True)
    for label, a, b in _cases(*SHAPES[name], rng):
        ref = np.matmul(a, b)
        one = None
        if control.set is not None and control.get is not None:
            before = control.get()
            control.set(1)
            one = np.matmul(a, b)
            control.set(before)
        variants: dict[str, Callable[[], Any]] = {
            "np.matmul": lambda a=a, b=b, ref=ref: np.matmul(a, b, out=ref)
        }
        mine = np.full_like(ref, np.nan)
        if gemm_batch(a, b, mine):
            variants["batch"] = lambda a=a, b=b, o=mine: gemm_batch(a, b, o)
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)  # the same strided views
            to = torch.empty(ref.shape)
            variants["torch"] = lambda ta=ta, tb=tb, to=to: torch.matmul(ta, tb, out=to)
        times: dict[str, list[float]] = {k: [] for k in variants}
        for fn in variants.values():
            fn()
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(variants)[::-1]
            for k in order:
                _time_into(variants[k], times[k])
        flops = 2 * ref.size * a.shape[-1]
        cells = []
        for k, ts in times.items():
            ms = statistics.median(ts)
            cells.append(f"{k} {ms:.3f} ms {flops / ms / 1e6:.0f} GFLOP/s")
        print(f"  {label:11s} {a.shape}@{b.shape[-2:]}: {' | '.join(cells)}", flush=True)
        if "batch" in variants:
            same = np.array_equal(mine, ref)
            alone = "?" if one is None else np.array_equal(mine, one)
            print(f"    batch: np.matmul's bits {same}, one BLAS thread's {alone}", flush=True)
        else:
            print("    batch: not applicable (np.matmul runs it)", flush=True)


def steps(name: str, count: int) -> None:
    import asgrad_workloads
    from asgrad.tensor.cpu.jit import batched_matmul

    w = asgrad_workloads.build(name, "cpu")
    times: dict[str, list[float]] = {"np.matmul": [], "threads": []}
    forms = {"np.matmul": "serial", "threads": "parallel"}
    losses: dict[str, float] = {}
    for r in range(2 + count):
        order = list(forms) if r % 2 == 0 else list(forms)[::-1]
        for k in order:
            batched_matmul.FORCE[0] = forms[k]
            start = time.perf_counter()
            loss = float(w.step())
            if r >= 2:
                times[k].append((time.perf_counter() - start) * 1e3)
            losses[k] = loss
    batched_matmul.FORCE[0] = None
    cells = [f"{k} {statistics.median(ts):9.2f} ms/step" for k, ts in times.items()]
    speed = statistics.median(times["np.matmul"]) / statistics.median(times["threads"])
    print(f"{name} step ({count} steps each, alternating): {' | '.join(cells)} | {speed:.2f}x")
    print(f"  losses of the last steps: {losses}", flush=True)


def torch_steps(name: str, count: int, n: int) -> None:
    import torch_workloads

    step, _, sync = torch_workloads.build(name, "cpu", n)
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    print(
        f"{name} PyTorch step ({count} steps, {n} threads): {statistics.median(times):9.2f} ms/step"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--torch-steps", type=int, default=0)
    p.add_argument("--workloads", default="transformer_large,transformer")
    args = p.parse_args()
    if args.torch_steps:
        for name in args.workloads.split(","):
            torch_steps(name, args.torch_steps, args.threads or os.cpu_count() or 1)
        return 0
    from asgrad.tensor.cpu.jit import threads

    n = args.threads or threads.threads()
    print(f"load average {os.getloadavg()}; numpy {np.__version__}")
    for name in args.workloads.split(","):
        if args.rounds:
            micro(name, args.rounds, n)
    if args.steps:
        os.environ.setdefault("ASGRAD_CPU_JIT", "1")
        for name in args.workloads.split(","):
            steps(name, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
