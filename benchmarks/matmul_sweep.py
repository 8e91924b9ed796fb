"""Matmul tile sweep: GPU time of every candidate tile (and split-K) per product shape.

For square products and the products of the ``transformer_large`` workload (forward
``x @ W``, ``dY @ W^T``, the weight gradients ``X^T @ dY`` over batch * seq rows, the
attention heads), times each tile the tuner considers for the shape
(:func:`asgrad.gpu.lowering._matmul_tuning.candidates`, plus :data:`TILES`) with
timestamp queries (GPU time only), the default choice (``auto``: the tuned tile where
tuning is on, measured and cached at its first use, else
:func:`asgrad.gpu.lowering.linalg.select`'s) and, where PyTorch with CUDA is
importable, cuBLAS fp32 (TF32 off) in the same run. Also times the column sums of bias
gradients (the block kernel, the thread-per-output kernel, ``torch.sum(dim=0)``) and
convolutions on the matmul tiles (the ``cnn`` workload's and a ResNet 3x3 layer,
forward and both gradients) against cuDNN.
Prints one JSON line per measurement and a table of the chosen tile per shape::

    WGPU_BACKEND_TYPE=Vulkan python benchmarks/matmul_sweep.py --json sweep.json
    WGPU_BACKEND_TYPE=Vulkan python benchmarks/matmul_sweep.py --quick   # lavapipe

``ASGRAD_MATMUL_TUNING=0`` times the rule's choice as ``auto`` instead of the tuned one.

Square products only, each candidate tile timed alone (GPU time by timestamps, the
least of three blocks of back-to-back products, as ``gpu_micro.py`` times them), its
result checked against numpy, ranked against cuBLAS fp32 (TF32 off) where PyTorch with
CUDA is importable::

    python benchmarks/matmul_sweep.py --sizes 1024,4096 --candidates all

``--candidates``: ``tuned`` (what the tuner times for the shape), ``all`` (every tile
the tuner knows, then a grid of tile parameters beyond them, `grid`), or tile names
(``128x128_8x8_k16du,128x128_8x8_k16dpu_w8/2``: ``/S`` cuts K in S pieces).

Given products, batched and transposed as a workload runs them (``--shapes default``:
those of ``transformer_large``, `PRODUCTS`; or ``MxNxK:LAYOUTS[:bBATCH]`` items, e.g.
``8192x1536x512:kk,256x64x256:mn:b256``, the layouts as in the tuner: A stored along
"k" (row-major) or "m" (transposed), B along "n" (row-major) or "k" (transposed)), each
candidate timed alone, checked against numpy (first and last rows of the first and
last matrix), ranked per shape against ``torch.matmul`` of the same storage and batch
(CUDA events, TF32 off), with the ``auto`` row (the tuned choice); a candidate that
fails is reported as an error and the sweep goes on; each shape gets ``--budget``
seconds after its tuning (``--total``: seconds for the whole sweep, past which a shape
gets only its ``auto`` row; ``--quiet``: no JSON line per row)::

    python benchmarks/matmul_sweep.py --shapes default --candidates all --budget 10 --quiet

``--candidates`` there: ``tuned``, ``new`` (`SHAPE_TILES` only), ``all`` (`SHAPE_TILES`,
the tuner's candidates, then the split tiles with K in pieces), or tile names.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from asgrad.gpu import GpuArray, get_device, to_gpu
from asgrad.gpu.device import limits
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering import conv, reduction
from asgrad.gpu.lowering._matmul_tiles import tile as parse_tile
from asgrad.gpu.lowering.linalg import MatrixView, choose, matmul_into, select
from asgrad.gpu.lowering.reduction import reduce_axis
from gpu_micro import _gpu_time as _gpu_time_best
from gpu_micro import _gpu_time_torch, _torch  # this folder: cuBLAS's column, TF32 off

Row = dict[str, Any]
# (name, batch, M, N, K, A stored transposed, B stored transposed)
Shape = tuple[str, int, int, int, int, bool, bool]

TILES: tuple[str, ...] = (
    "128x128_8x8_k8",
    "128x128_8x8_k16",
    "128x128_8x8_k16u",
    "128x128_8x8_k8d",
    "128x128_8x8_k8du",
    "128x64_8x8_k8du",
    "64x64_8x8_k8",
    "64x64_8x8_k8du",
    "128x64_8x4_k8",
    "64x64_4x4_k16",
    "32x32_4x4_k8",
)
SPLIT_TILES: tuple[str, ...] = (
    "128x128_8x8_k8du",
    "128x128_8x8_k16u",
    "128x64_8x4_k8",
    "64x64_8x8_k8",
    "64x64_8x8_k8du",
)


def shapes(quick: bool) -> list[Shape]:
    """The swept products: squares and transformer_large's (B*T = 8192, d 512, FF 2048)."""
    if quick:
        return [("sq128", 1, 128, 128, 128, False, False), ("wg", 1, 64, 96, 512, True, False)]
    rows, d, ff, vocab, heads = 8192, 512, 2048, 256, 256
    out: list[Shape] = [(f"sq{n}", 1, n, n, n, False, False) for n in (64, 128, 256, 512)]
    out += [(f"sq{n}", 1, n, n, n, False, False) for n in (2048, 4096)]
    for name, fin, fout in (
        ("qkv", d, 3 * d),
        ("proj", d, d),
        ("ff1", d, ff),
        ("ff2", ff, d),
        ("head", d, vocab),
    ):
        out.append((f"fwd_{name}", 1, rows, fout, fin, False, False))
        out.append((f"dx_{name}", 1, rows, fin, fout, False, True))
        out.append((f"dw_{name}", 1, fin, fout, rows, True, False))
    out.append(("dw_ff1_batched", 32, d, ff, 256, True, False))
    out += [
        ("att_qk", heads, 256, 256, 64, False, True),
        ("att_pv", heads, 256, 64, 256, False, False),
        ("att_dv", heads, 256, 64, 256, True, False),
        ("sq1024", 1, 1024, 1024, 1024, False, False),  # last: after the GPU is warm
    ]
    return out


def _gpu_time(record: Callable[[], object], reps: int) -> float:
    """Seconds per call of ``record`` on the GPU (timestamps), wall time as a fallback."""
    device = get_device()
    record()  # compile, warm
    device.synchronize()
    return tuning.block_seconds(device, record, reps) / reps


def _torch_time(torch: Any, fn: Callable[[], object], reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return float(begin.elapsed_time(end)) * 1e-3 / reps


def sweep_shape(shape: Shape, torch: Any, quick: bool) -> list[Row]:
    name, batch, M, N, K, ta, tb = shape
    rng = np.random.default_rng(0)
    lead = (batch,) if batch > 1 else ()
    a = rng.standard_normal((*lead, M, K), dtype=np.float32)
    b = rng.standard_normal((*lead, K, N), dtype=np.float32)
    ga = to_gpu(np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a)
    gb = to_gpu(np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b)
    va = MatrixView(ga).transpose() if ta else MatrixView(ga)
    vb = MatrixView(gb).transpose() if tb else MatrixView(gb)
    out = GpuArray.empty((*lead, M, N), np.float32)
    flops = 2.0 * batch * M * N * K
    reps = 2 if quick else int(min(200, max(3, 1.5e-2 * 25e12 / flops)))
    device = get_device()
    shared = device.limits["max-compute-workgroup-storage-size"]
    layouts = ("m" if ta else "k", "k" if tb else "n")
    rule = select(M, N, K, batch, shared, layouts)
    start = time.perf_counter()
    auto = choose(va, vb)  # the tuned choice (measured here at its bucket's first use)
    tune_s = time.perf_counter() - start
    problem = tuning.Problem(M, N, K, batch, layouts, max_shared=shared,
                             max_groups=device.max_groups)  # fmt: skip
    configs: list[tuple[str | None, int | None]] = [(None, None)]
    configs += [(t, s) for t, s in tuning.candidates(problem, rule)]
    configs += [(t, 1) for t in TILES if (t, 1) not in configs]
    few = -(-M // 128) * -(-N // 128) < 132  # under one wave of 128x128 tiles
    if few and batch == 1 and K >= 512:
        configs += [(t, s) for t in SPLIT_TILES for s in (2, 4, 8) if (t, s) not in configs]
    rows: list[Row] = []
    for tile, splits in configs:

        def record(tile: str | None = tile, splits: int | None = splits) -> None:
            matmul_into(va, vb, out, tile, splits)

        sec = _gpu_time(record, reps)
        row: Row = {
            "bench": "matmul",
            "shape": name,
            "batch": batch,
            "M": M,
            "N": N,
            "K": K,
            "tile": tile or f"auto:{auto[0]}/{auto[1]}",
            "splits": splits or auto[1],
            "us": sec * 1e6,
            "tflops": flops / sec / 1e12,
        }
        if tile is None:  # check the auto pick against numpy on a slice
            row.update(rule=f"{rule[0]}/{rule[1]}", tuned=tuning.enabled(device))
            row["tune_s"] = round(tune_s, 3)
            got = out.numpy().reshape(-1, M, N)[0, :32]
            ref = a.reshape(-1, M, K)[0, :32] @ b.reshape(-1, K, N)[0]
            row["relerr"] = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if torch is not None:
        ta_, tb_ = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        if ta:
            ta_ = ta_.transpose(-1, -2).contiguous().transpose(-1, -2)
        if tb:
            tb_ = tb_.transpose(-1, -2).contiguous().transpose(-1, -2)
        sec = _torch_time(torch, lambda: ta_ @ tb_, reps)
        rows.append(
            {
                "bench": "matmul",
                "shape": name,
                "tile": "torch-cuda-fp32",
                "us": sec * 1e6,
                "tflops": flops / sec / 1e12,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def sweep_columns(torch: Any, quick: bool) -> list[Row]:
    """Column sums ([R, C] -> [C]) with the block kernel, the old kernel and torch."""
    sizes = [(512, 64)] if quick else [(8192, 256), (8192, 512), (8192, 2048), (32, 1 << 20)]
    rows: list[Row] = []
    for r, c in sizes:
        x = np.random.default_rng(0).standard_normal((r, c), dtype=np.float32)
        gx = to_gpu(x)
        out = GpuArray.empty((c,), np.float32)
        for impl, block in (("block", reduction._BLOCK), ("thread-per-output", 1 << 30)):
            saved = reduction._BLOCK
            reduction._BLOCK = block
            try:
                sec = _gpu_time(partial(reduce_axis, "sum", gx, 0, out=out), 2 if quick else 50)
                err = float(np.abs(out.numpy() - x.sum(0)).max())
            finally:
                reduction._BLOCK = saved
            row = {"bench": "colsum", "R": r, "C": c, "impl": impl, "us": sec * 1e6}
            row["gbps"] = r * c * 4 / sec / 1e9
            row["maxerr"] = err
            rows.append(row)
            print(json.dumps(row), flush=True)
        if torch is not None:
            tx = torch.from_numpy(x).cuda()
            sec = _torch_time(torch, partial(tx.sum, 0), 50)
            row = {"bench": "colsum", "R": r, "C": c, "impl": "torch", "us": sec * 1e6}
            row["gbps"] = r * c * 4 / sec / 1e9
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


# (name, x shape, w shape, padding): the cnn workload's convolutions, and a wider one
CONVS: tuple[tuple[str, tuple[int, ...], tuple[int, ...], int], ...] = (
    ("cnn_conv1", (32, 1, 28, 28), (16, 1, 3, 3), 1),
    ("cnn_conv2", (32, 16, 14, 14), (32, 16, 3, 3), 1),
    ("resnet_3x3", (32, 64, 56, 56), (64, 64, 3, 3), 1),
)


def sweep_conv(torch: Any, quick: bool) -> list[Row]:
    """Convolutions on the matmul tiles (forward with a bias, input and weight
    gradients) with the default tile choice, against cuDNN fp32 (TF32 off)."""
    rows: list[Row] = []
    for name, xs, ws, pad in CONVS[:1] if quick else CONVS:
        rng = np.random.default_rng(0)
        x, w = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
        bias = rng.standard_normal(ws[0], dtype=np.float32)
        gx, gw, gb = to_gpu(x), to_gpu(w), to_gpu(bias)
        oh, ow = xs[2] + 2 * pad - ws[2] + 1, xs[3] + 2 * pad - ws[3] + 1
        gy = to_gpu(rng.standard_normal((xs[0], ws[0], oh, ow), dtype=np.float32))
        one, p2 = (1, 1), (pad, pad)
        flops = 2.0 * xs[0] * ws[0] * oh * ow * ws[1] * ws[2] * ws[3]
        reps = 2 if quick else int(min(200, max(3, 1.5e-2 * 25e12 / flops)))
        runs: dict[str, Callable[[], object]] = {
            "forward": partial(conv.conv2d, gx, gw, gb, one, p2, one, 1, (oh, ow)),
            "input_grad": partial(conv.conv2d_backward_input, gy, gw, xs, one, p2, one, 1),
            "weight_grad": partial(conv.conv2d_backward_weight, gx, gy, ws[2:], one, p2, one, 1),
        }
        for kind, run in runs.items():
            sec = _gpu_time(run, reps)
            row: Row = {"bench": "conv", "shape": name, "pass": kind, "impl": "asgrad"}
            row.update(us=sec * 1e6, tflops=flops / sec / 1e12)
            rows.append(row)
            print(json.dumps(row), flush=True)
        if torch is not None:
            tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
            tb, ty = torch.from_numpy(bias).cuda(), torch.from_numpy(gy.numpy()).cuda()
            nnf = torch.nn.grad
            torch_runs: dict[str, Callable[[], object]] = {
                "forward": partial(torch.nn.functional.conv2d, tx, tw, tb, padding=pad),
                "input_grad": partial(nnf.conv2d_input, xs, tw, ty, padding=pad),
                "weight_grad": partial(nnf.conv2d_weight, tx, ws, ty, padding=pad),
            }
            for kind, run in torch_runs.items():
                sec = _torch_time(torch, run, reps)
                row = {"bench": "conv", "shape": name, "pass": kind, "impl": "torch-cudnn-fp32"}
                row.update(us=sec * 1e6, tflops=flops / sec / 1e12)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


# The tile parameters `grid` combines: blocks with their outputs per thread and the
# subgroup layouts tried for each, K steps, the K loop's form (one buffer; two; two with
# constant indexes).
GRID_BLOCKS: dict[str, tuple[str, ...]] = {
    "128x128_8x8": ("", "_w8", "_w4"),
    "128x128_8x16": ("", "_w4"),  # 128 threads of 128 outputs (as cuBLAS's SGEMM)
    "128x128_16x8": ("", "_w8"),
    "128x256_8x16": ("", "_w8"),
    "256x128_16x8": ("", "_w8"),
    "256x128_8x16": ("", "_w4"),
    "64x128_8x8": ("", "_w8"),
    "128x64_8x8": ("",),
    "64x64_8x8": ("",),
    # fewer outputs per thread, more threads: for products that 64x64 tiles leave
    # short of a few workgroups per multiprocessor (timed only there, as the tuner)
    "64x64_4x8": ("",),
    "64x64_8x4": ("", "_w4"),
    "64x64_4x4": ("", "_w8"),
}
GRID_DEPTHS = (8, 16, 32)
GRID_LOOPS = ("u", "du", "dpu")
# A grid tile is timed where it gives at least this many workgroups.
GRID_MIN_GROUPS = 64


def grid(max_shared: int) -> list[str]:
    """Every valid tile of `GRID_BLOCKS` x `GRID_DEPTHS` x `GRID_LOOPS` within
    ``max_shared`` bytes of workgroup memory and `tuning.MAX_THREADS`."""
    out = []
    for (block, warps), k, loop in itertools.product(GRID_BLOCKS.items(), GRID_DEPTHS, GRID_LOOPS):
        for warp in warps:
            name = f"{block}_k{k}{loop}{warp}"
            try:
                t = parse_tile(name)
            except GpuError:
                continue
            if t.shared <= max_shared and t.threads <= tuning.MAX_THREADS:
                out.append(name)
    return out


def _configs(spec: str, n: int, shared: int) -> list[tuple[str, int]]:
    """The (tile, splits) that ``--candidates spec`` names for an n x n x n product."""
    device = get_device()
    problem = tuning.Problem(n, n, n, 1, ("k", "n"), (True, True), max_shared=shared,
                             max_groups=device.max_groups)  # fmt: skip
    rule = select(n, n, n, 1, shared)
    if spec in ("tuned", "all"):
        out = list(tuning.candidates(problem, rule))
        if spec == "all":
            known = [*tuning.TILES, *tuning.SPLIT_TILES, *TILES]
            out += [(t, 1) for t in known]
            full = problem.groups(tuning.FILLING) >= tuning.MANY_GROUPS
            for name in grid(shared):
                t = parse_tile(name)
                if problem.groups(name) >= GRID_MIN_GROUPS and not (full and t.tm * t.tn < 64):
                    out.append((name, 1))
    else:
        out = []
        for item in spec.split(","):
            name, _, splits = item.strip().partition("/")
            out.append((name, int(splits or 1)))
    seen: set[tuple[str, int]] = set()
    return [c for c in out if problem.fits(c) and not (c in seen or seen.add(c))]


def sweep_sizes(sizes: list[int], spec: str, torch: Any, budget: float, top: int = 40) -> list[Row]:
    """Each candidate of ``spec`` (`_configs`) timed alone at each n x n x n product,
    with the tuned default (``auto``) and cuBLAS; a ranking per size at the end. The
    candidates left when ``budget`` seconds have passed at a size are skipped (and
    listed); the ranking lists the ``top`` fastest, then a summary per parameter."""
    device = get_device()
    shared = device.limits["max-compute-workgroup-storage-size"]
    registered = set(tuning.TILES) | set(tuning.SPLIT_TILES)
    rows: list[Row] = []
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ref = a[:64] @ b
        ga, gb = to_gpu(a), to_gpu(b)
        va, vb = MatrixView(ga), MatrixView(gb)
        out = GpuArray.empty((n, n), np.float32)
        flops = 2.0 * n**3
        reps = max(2, min(50, int(2e12 / flops)))
        base: Row = {"bench": "matmul_square", "n": n}
        cublas = None
        if torch is not None:
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            sec = _gpu_time_torch(torch, lambda ta=ta, tb=tb: ta @ tb, reps)
            cublas = flops / sec / 1e12
            rows.append({**base, "tile": "torch-cuda-fp32", "us": sec * 1e6, "tflops": cublas})
            print(json.dumps(rows[-1]), flush=True)
        start = start_size = time.perf_counter()
        auto = choose(va, vb)  # the tuned choice (measured now at its bucket's first use)
        tune_s = time.perf_counter() - start
        configs: list[tuple[str | None, int]] = [(None, auto[1])]
        configs += _configs(spec, n, shared)
        skipped = []
        for tile, splits in configs:
            if tile is not None and time.perf_counter() - start_size > budget:
                skipped.append(f"{tile}/{splits}")
                continue

            record = partial(matmul_into, va, vb, out, tile, splits)
            row: Row = {**base, "tile": tile or f"auto:{auto[0]}", "splits": splits}
            try:
                begin = time.perf_counter()
                sec = _gpu_time_best(record, reps) or _gpu_time(record, reps)
                row["first_s"] = round(time.perf_counter() - begin, 2)  # compile + timing
            except Exception as exc:  # a kernel this adapter refuses: noted, the sweep goes on
                row["error"] = str(exc)[:200]
                print(json.dumps(row), flush=True)
                continue
            got = out.numpy()[:64]
            row.update(us=sec * 1e6, tflops=flops / sec / 1e12)
            row["relerr"] = float(np.abs(got - ref).max() / np.abs(ref).max())
            row["registered"] = tile is None or tile in registered
            if cublas:
                row["vs_cublas"] = round(row["tflops"] / cublas, 3)
            if tile is None:
                row["tune_s"] = round(tune_s, 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
        if skipped:
            print(f"# n={n}: over the budget, not timed: {' '.join(skipped)}", flush=True)
    for n in sizes:
        ranked = sorted(
            (r for r in rows if r["n"] == n and "tflops" in r), key=lambda r: -r["tflops"]
        )
        print(f"\n| n={n} | tile | splits | us | TFLOP/s | vs cuBLAS | rel. err | registered |")
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        for rank, r in enumerate(ranked, 1):
            if rank > top and not str(r["tile"]).startswith(("auto", "torch")):
                continue
            ratio = f"{r['vs_cublas']:.3f}" if "vs_cublas" in r else "-"
            err = f"{r['relerr']:.1e}" if "relerr" in r else "-"
            mark = "yes" if r.get("registered") else "-"
            print(
                f"| {rank} | {r['tile']} | {r.get('splits', '-')} | {r['us']:.0f} | "
                f"{r['tflops']:.2f} | {ratio} | {err} | {mark} |"
            )
        print(f"\nn={n}, the best TFLOP/s per tile parameter (unsplit tiles):")
        for label, value in _PARAMETERS.items():
            best: dict[str, float] = {}
            for r in ranked:
                if r.get("splits") == 1 and not str(r["tile"]).startswith(("auto", "torch")):
                    key = value(parse_tile(str(r["tile"])))
                    best[key] = max(best.get(key, 0.0), r["tflops"])
            print(f"  {label}: " + ", ".join(f"{k} {v:.1f}" for k, v in best.items()))
    return rows


# (name, M, N, K, layouts, batch, times per transformer_large step): the products of
# the workload (B * T = 8192 rows, d 512, FF 2048, vocab 256, 4 layers, 32 x 8 heads
# of 256 x 64): a linear's forward x @ W^T (W stored (out, in): B along K), its input
# gradient dY @ W and weight gradient X^T @ dY (over the rows), the attention scores
# Q @ K^T (and dP = dO @ V^T), P @ V (and dQ = dS @ K), dV = P^T @ dO and
# dK^T = Q^T @ dS.
Product = tuple[str, int, int, int, tuple[str, str], int, int]
_LINEARS = (("qkv", 512, 1536, 4), ("proj", 512, 512, 4), ("ff1", 512, 2048, 4),
            ("ff2", 2048, 512, 4), ("head", 512, 256, 1))  # fmt: skip
PRODUCTS: tuple[Product, ...] = (
    *((f"fwd_{n}", 8192, fout, fin, ("k", "k"), 1, c) for n, fin, fout, c in _LINEARS),
    *((f"dx_{n}", 8192, fin, fout, ("k", "n"), 1, c) for n, fin, fout, c in _LINEARS),
    *((f"dw_{n}", fin, fout, 8192, ("m", "n"), 1, c) for n, fin, fout, c in _LINEARS),
    ("att_qk", 256, 256, 64, ("k", "k"), 256, 8),
    ("att_pv", 256, 64, 256, ("k", "n"), 256, 8),
    ("att_dv", 256, 64, 256, ("m", "n"), 256, 4),
    ("att_dkt", 64, 256, 256, ("m", "n"), 256, 4),
)
# Tiles timed first for `--shapes` (before the tuner's own candidates): vec4 stores
# (s), 8x16 outputs per thread with operands read along K as 4x4 blocks (q) and K
# steps of 16, and for the attention heads tiles covering a whole 64-wide N, deeper K
# steps, more outputs per thread.
SHAPE_TILES: tuple[str, ...] = (
    # s: C stored as vec4 (the attention scores write 64 MiB at K = 64)
    "128x128_8x16_k16qsu",
    "128x256_8x16_k16qsu",
    "128x256_8x16_k8qsu",
    "128x128_8x8_k16qsu",
    "128x64_8x8_k16qsu",
    "128x64_8x8_k32qsu",
    "64x64_8x8_k16qsu",
    "256x64_16x8_k16qsu",
    "128x256_8x16_k8su",
    "128x256_8x16_k8qu",
    "128x256_8x16_k16qu",
    "128x256_8x16_k16u",
    "128x256_8x16_k8dqu",
    "128x128_8x16_k8qu",
    "128x128_8x16_k16qu",
    "128x128_8x16_k16u",
    "128x128_8x16_k16dqu",
    "128x128_8x16_k8dqu",
    "128x128_8x16_k32qu",
    "256x128_16x8_k8qu",
    "256x128_16x8_k16qu",
    "128x128_8x8_k16qu",
    "128x128_8x8_k16dqu",
    "128x128_8x8_k8dqu_w8",
    "128x128_8x8_k32qu",
    "256x64_16x8_k16qu",
    "256x64_8x16_k16qu",
    "128x64_8x16_k16qu",
    "128x64_8x8_k16qu",
    "128x64_8x8_k32qu",
    "128x64_8x8_k16dqu",
    "64x256_8x16_k16qu",
    "64x128_8x8_k16qu",
    "64x64_8x8_k16qu",
    "64x64_8x8_k32qu",
    "64x64_8x4_k16dpqu",
    "64x64_8x4_k32qu",
)

# Tiles timed with K in pieces (`tuning.split_counts`) where 128x128 tiles leave the
# GPU short of workgroups (the weight gradients): 8x16 outputs per thread.
SPLIT_SHAPE_TILES: tuple[str, ...] = (
    "128x128_8x16_k8su",
    "128x128_8x16_k8u",
    "128x128_8x16_k16u",
    "128x128_8x16_k16qu",
    "128x256_8x16_k8u",
    "128x256_8x16_k16qu",
)


def parse_products(spec: str) -> list[Product]:
    """``default`` (`PRODUCTS`) or comma-separated ``MxNxK:LAYOUTS[:bBATCH]``."""
    if spec == "default":
        return list(PRODUCTS)
    out: list[Product] = []
    for item in spec.split(","):
        dims, layouts, *rest = item.strip().split(":")
        m, n, k = (int(v) for v in dims.split("x"))
        if len(layouts) != 2 or layouts[0] not in "km" or layouts[1] not in "nk":
            raise SystemExit(f"--shapes {item!r}: layouts are two letters, A k|m, B n|k")
        batch = int(rest[0].removeprefix("b")) if rest else 1
        out.append((item.strip(), m, n, k, (layouts[0], layouts[1]), batch, 1))
    return out


def _stored(x: np.ndarray, transposed: bool) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if transposed else x


def _product_configs(
    spec: str, problem: tuning.Problem, rule: tuple[str, int]
) -> list[tuple[str, int]]:
    """The (tile, splits) of ``--candidates spec`` for one product, each once (a q tile
    whose operands are both read along M / N is the same kernel as its plain twin)."""
    if spec in ("new", "all", "tuned"):
        out = []
        few = problem.groups("128x128_8x8_k16u") < tuning.SPLIT_BELOW_GROUPS
        if spec != "tuned" and few and problem.splittable:  # K in pieces: 8x16 tiles first
            for name in SPLIT_SHAPE_TILES:
                out += [(name, s) for s in tuning.split_counts(problem, name)]
        out += [] if spec == "tuned" else [(t, 1) for t in SHAPE_TILES]
        if spec != "new":
            out += tuning.candidates(problem, rule)
        if spec == "all":
            out += [(t, 1) for t in (*tuning.TILES, *TILES)]
    else:
        out = []
        for item in spec.split(","):
            name, _, splits = item.strip().partition("/")
            out.append((name, int(splits or 1)))
    seen: set[tuple[str, int]] = set()
    unique = []
    for name, splits in out:
        try:
            t = parse_tile(name)
        except GpuError as exc:
            print(f"# --candidates: {name}: error: {exc}", flush=True)
            continue
        if t.quad and "k" not in problem.layouts:
            name = dataclasses.replace(t, quad=False).name
        if spec in ("new", "all", "tuned") and problem.use(name) < tuning.MIN_USE:
            continue
        choice = (name, splits)
        if choice not in seen and problem.fits(choice):
            seen.add(choice)
            unique.append(choice)
    return unique


def sweep_products(
    products: list[Product],
    spec: str,
    torch: Any,
    budget: float,
    top: int = 12,
    total: float = 0.0,
    quiet: bool = False,
) -> list[Row]:
    """Each candidate of ``spec`` timed alone on each product of ``products`` (its
    storage, transposition and batch), checked against numpy, with the ``auto`` row
    and torch.matmul of the same operands; a ranking per product, then what the best
    tiles would save per transformer_large step (times the product's count). Each
    product's candidates get ``budget`` seconds after its tuning; past ``total`` seconds
    of the whole sweep (0: no limit) a product gets only its ``auto`` row. ``quiet``:
    no JSON line per row (the tables and errors only)."""

    def emit(row: Row) -> None:
        if not quiet or "error" in row:
            print(json.dumps(row), flush=True)

    begin_all = time.perf_counter()
    device = get_device()
    shared = device.limits["max-compute-workgroup-storage-size"]
    registered = {*tuning.TILES, *tuning.SPLIT_TILES, *tuning.COPY_TILES, *tuning.BATCH_TILES}
    rows: list[Row] = []
    for name, M, N, K, layouts, batch, count in products:
        rng = np.random.default_rng(0)
        lead = (batch,) if batch > 1 else ()
        a = rng.standard_normal((*lead, M, K), dtype=np.float32)
        b = rng.standard_normal((*lead, K, N), dtype=np.float32)
        ta, tb = layouts[0] == "m", layouts[1] == "k"
        va, vb = MatrixView(to_gpu(_stored(a, ta))), MatrixView(to_gpu(_stored(b, tb)))
        va, vb = (va.transpose() if ta else va), (vb.transpose() if tb else vb)
        out = GpuArray.empty((*lead, M, N), np.float32)
        edge = min(M, 32)
        a3, b3 = a.reshape(-1, M, K), b.reshape(-1, K, N)
        ends = sorted({0, len(a3) - 1})
        refs = {(i, r0): a3[i, r0 : r0 + edge] @ b3[i] for i in ends for r0 in (0, M - edge)}
        scale = max(float(np.abs(v).max()) for v in refs.values())
        flops = 2.0 * batch * M * N * K
        reps = max(2, min(100, int(5e-3 * 40e12 / flops)))
        base: Row = {"bench": "matmul_product", "shape": name, "M": M, "N": N, "K": K,
                     "layouts": "".join(layouts), "batch": batch, "count": count}  # fmt: skip
        vec = (M % 4 == 0 if ta else K % 4 == 0, K % 4 == 0 if tb else N % 4 == 0)
        problem = tuning.Problem(M, N, K, batch, layouts, vec, max_shared=shared,
                                 max_groups=device.max_groups)  # fmt: skip
        rule = select(M, N, K, batch, shared, layouts)
        cublas = None
        if torch is not None:
            try:
                xa, xb = (
                    torch.from_numpy(_stored(a, ta)).cuda(),
                    torch.from_numpy(_stored(b, tb)).cuda(),
                )
                xa, xb = (xa.transpose(-1, -2) if ta else xa), (xb.transpose(-1, -2) if tb else xb)
                sec = _gpu_time_torch(torch, lambda xa=xa, xb=xb: xa @ xb, reps)
                cublas = sec
                rows.append({**base, "tile": "torch-cuda-fp32", "splits": 1, "us": sec * 1e6,
                             "tflops": flops / sec / 1e12})  # fmt: skip
                emit(rows[-1])
            except Exception as exc:  # no comparison column, the sweep goes on
                print(f"# {name}: torch failed: {str(exc)[:200]}", flush=True)
        start = time.perf_counter()
        try:
            auto = choose(va, vb)  # the tuned choice (measured now at its bucket's first use)
        except Exception as exc:
            auto = rule
            print(f"# {name}: tuning failed ({str(exc)[:200]}); auto is the rule's", flush=True)
        tune_s = time.perf_counter() - start
        start = time.perf_counter()
        if total and start - begin_all > total:
            budget_here = 0.0
            print(f"# {name}: past --total, only the auto row", flush=True)
        else:
            budget_here = budget
        configs: list[tuple[str | None, int]] = [(None, auto[1])]
        configs += _product_configs(spec, problem, rule)
        skipped = []
        for tile, splits in configs:
            if tile is not None and time.perf_counter() - start > budget_here:
                skipped.append(f"{tile}/{splits}")
                continue
            record = partial(matmul_into, va, vb, out, tile, splits)
            row: Row = {**base, "tile": tile or f"auto:{auto[0]}", "splits": splits}
            try:
                begin = time.perf_counter()
                sec = _gpu_time_best(record, reps) or _gpu_time(record, reps)
                row["first_s"] = round(time.perf_counter() - begin, 2)
                got = out.numpy().reshape(-1, M, N)
                err = max(
                    float(np.abs(got[i, r0 : r0 + edge] - ref).max())
                    for (i, r0), ref in refs.items()
                ) / max(scale, 1e-30)
            except Exception as exc:  # a kernel this adapter refuses: noted, the sweep goes on
                row["error"] = str(exc)[:200]
                rows.append(row)
                emit(row)
                continue
            row.update(us=sec * 1e6, tflops=flops / sec / 1e12, relerr=err)
            if err > 1e-4:
                row["error"] = f"wrong result: relative error {err:.1e}"
            row["registered"] = tile is None or tile in registered
            if cublas:
                row["vs_cublas"] = round(cublas / sec, 3)
            if tile is None:
                row.update(rule=f"{rule[0]}/{rule[1]}", tune_s=round(tune_s, 3))
                row["tuned"] = tuning.enabled(device)
            rows.append(row)
            emit(row)
        if skipped:
            print(f"# {name}: over the budget, not timed: {' '.join(skipped)}", flush=True)
    _rank_products(products, rows, top)
    return rows


def _rank_products(products: list[Product], rows: list[Row], top: int) -> None:
    """Print the ranking per product and the step time the best tiles would save."""
    total_auto = total_best = total_torch = 0.0
    summary = []
    for name, M, N, K, layouts, batch, count in products:
        mine = [r for r in rows if r["shape"] == name]
        ok = sorted((r for r in mine if "tflops" in r and "error" not in r), key=lambda r: r["us"])
        print(f"\n| {name} {M}x{N}x{K} {''.join(layouts)} b{batch} | tile | splits | us | "
              "TFLOP/s | vs cuBLAS | rel. err | registered |")  # fmt: skip
        print("|---:|---|---:|---:|---:|---:|---:|---|")
        for rank, r in enumerate(ok, 1):
            if rank > top and not str(r["tile"]).startswith(("auto", "torch")):
                continue
            ratio = f"{r['vs_cublas']:.3f}" if "vs_cublas" in r else "-"
            err = f"{r['relerr']:.1e}" if "relerr" in r else "-"
            mark = "yes" if r.get("registered") else "-"
            print(f"| {rank} | {r['tile']} | {r['splits']} | {r['us']:.1f} | "
                  f"{r['tflops']:.2f} | {ratio} | {err} | {mark} |")  # fmt: skip
        for r in mine:
            if "error" in r:
                print(f"  error: {r['tile']}/{r['splits']}: {r['error']}")
        auto = next((r for r in ok if str(r["tile"]).startswith("auto")), None)
        best = next((r for r in ok if not str(r["tile"]).startswith(("auto", "torch"))), None)
        tor = next((r for r in ok if r["tile"] == "torch-cuda-fp32"), None)
        best = best or auto
        if auto and best:
            total_auto += count * auto["us"]
            total_best += count * min(best["us"], auto["us"])
            total_torch += count * tor["us"] if tor else 0.0
            summary.append(
                f"| {name} | {count} | {auto['tile'].removeprefix('auto:')}/{auto['splits']} "
                f"{auto['us']:.1f} | {best['tile']}/{best['splits']} {best['us']:.1f} | "
                + (f"{tor['us']:.1f} |" if tor else "- |")
            )
    print("\n| product | per step | auto (us) | best timed (us) | torch (us) |")
    print("|---|---:|---|---|---:|")
    print("\n".join(summary))
    print(f"\nper step: auto {total_auto / 1e3:.3f} ms, best {total_best / 1e3:.3f} ms, "
          f"torch {total_torch / 1e3:.3f} ms")  # fmt: skip


# How `sweep_sizes` groups the tiles in its summary: one line per parameter.
_PARAMETERS: dict[str, Callable[[Any], str]] = {
    "block/thread": lambda t: f"{t.bm}x{t.bn}_{t.tm}x{t.tn}",
    "K step": lambda t: f"k{t.bk}",
    "loop": lambda t: "d" * t.double + "p" * t.pingpong + "u" * t.unroll or "plain",
    "subgroup": lambda t: f"w{t.warp}" if t.warp else "rows",
}


def warm_up(seconds: float) -> None:
    """Keep the GPU busy for a while so its clocks are up before anything is timed."""
    device = get_device()
    a = to_gpu(np.ones((2048, 2048), np.float32))
    out = GpuArray.empty((2048, 2048), np.float32)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            matmul_into(MatrixView(a), MatrixView(a), out)
        device.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (lavapipe)")
    parser.add_argument("--json", help="write all rows to this file")
    parser.add_argument("--only", help="comma-separated shape names to sweep")
    parser.add_argument(
        "--shared", type=int, default=32768, help="workgroup memory to ask the adapter for"
    )
    parser.add_argument(
        "--sizes", help="comma-separated n: time square n x n x n products per candidate only"
    )
    parser.add_argument(
        "--candidates",
        default="tuned",
        help="with --sizes: tuned, all (the tuner's tiles and a grid beyond), or tile names",
    )
    parser.add_argument(
        "--budget", type=float, default=200.0, help="with --sizes / --shapes: seconds per size"
    )
    parser.add_argument("--top", type=int, default=40, help="with --sizes: rows ranked")
    parser.add_argument(
        "--total", type=float, default=0.0, help="with --shapes: seconds for the whole sweep"
    )
    parser.add_argument("--quiet", action="store_true", help="with --shapes: tables only")
    parser.add_argument(
        "--shapes",
        help="default (transformer_large's products) or MxNxK:LAYOUTS[:bBATCH],...: time "
        "those products per candidate only (--candidates tuned, new, all or tile names)",
    )
    args = parser.parse_args()
    limits.TILE_CAPS["max-compute-workgroup-storage-size"] = args.shared
    device = get_device()
    shared = device.limits["max-compute-workgroup-storage-size"]
    global TILES, SPLIT_TILES
    TILES = tuple(t for t in TILES if parse_tile(t).shared <= shared)
    SPLIT_TILES = tuple(t for t in SPLIT_TILES if parse_tile(t).shared <= shared)
    if not args.quick:
        warm_up(2.0)
    caps = device.capabilities
    print(f"# adapter: {caps.adapter} via {caps.backend}", flush=True)
    on = tuning.enabled(device)
    where = tuning.TileCache.for_device(device).path if on else "off"
    print(f"# matmul tuning ({tuning.ENV}): {where}", flush=True)
    torch = None if args.quick else _torch()
    rows: list[Row] = []
    if args.shapes:
        products = parse_products(args.shapes)
        rows = sweep_products(
            products, args.candidates, torch, args.budget, min(args.top, 12), args.total, args.quiet
        )
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"adapter": caps.adapter, "rows": rows}, fh)
        return
    if args.sizes:
        sizes = [int(v) for v in args.sizes.split(",")]
        rows = sweep_sizes(sizes, args.candidates, torch, args.budget, args.top)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"adapter": caps.adapter, "rows": rows}, fh)
        return
    for shape in shapes(args.quick):
        if args.only and shape[0] not in args.only.split(","):
            continue
        rows += sweep_shape(shape, torch, args.quick)
    rows += sweep_columns(torch, args.quick)
    if not args.only:
        rows += sweep_conv(torch, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"adapter": caps.adapter, "rows": rows}, fh)
    best: dict[str, Row] = {}
    for row in rows:
        forced = row["bench"] == "matmul" and not str(row["tile"]).startswith(("auto", "torch"))
        if forced and (row["shape"] not in best or row["us"] < best[row["shape"]]["us"]):
            best[row["shape"]] = row
    print(
        "\n| shape | M x N x K (batch) | chosen | TFLOP/s | rule | best timed | torch |"
        "\n|---|---|---|---|---|---|---|"
    )
    for name, b in best.items():
        auto = next(r for r in rows if r.get("shape") == name and str(r["tile"]).startswith("auto"))
        tor = next(
            (r for r in rows if r.get("shape") == name and r["tile"] == "torch-cuda-fp32"), None
        )
        t = f"{tor['us']:.0f} us ({tor['tflops']:.1f})" if tor else "-"
        print(
            f"| {name} | {auto['M']} x {auto['N']} x {auto['K']} ({auto['batch']}) | "
            f"{auto['tile'].removeprefix('auto:')} {auto['us']:.0f} us | {auto['tflops']:.2f} | "
            f"{auto['rule']} | {b['tile']}/{b['splits']} {b['us']:.0f} us | {t} |"
        )


if __name__ == "__main__":
    main()
