"""GPU micro-benchmarks: matmul TFLOP/s, copy bandwidth, host cost of a dispatch.

Prints one JSON line per measurement and a summary table; where PyTorch with CUDA is
importable, times the same operations with it in the same run (fp32, TF32 off). A
matmul's rate is its GPU time (timestamp queries around many products back to back in
one compute pass; CUDA events for PyTorch), so small products are not launch-bound;
the host's wall time is printed beside it, and the tile the lowering chose per size::

    WGPU_BACKEND_TYPE=Vulkan python benchmarks/gpu_micro.py            # full sizes
    WGPU_BACKEND_TYPE=Vulkan python benchmarks/gpu_micro.py --quick    # lavapipe/CI
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from asgrad.gpu import GpuArray, get_device, to_gpu
from asgrad.gpu.device.copy import COPY_ITEMS, copy_bytes
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.linalg import MatrixView, choose, matmul_into
from asgrad.gpu.plan.capture import profile
from asgrad.gpu.plan.dispatch_kinds import count_kinds

Row = dict[str, Any]


def _torch() -> Any:
    try:
        torch = importlib.import_module("torch")  # optional: the comparison column
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def _time_gpu(record: Callable[[], object], reps: int) -> float:
    """Seconds per repetition of ``record`` (all reps in one encoder, then a sync)."""
    device = get_device()
    record()
    device.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        record()
    device.synchronize()
    return (time.perf_counter() - start) / reps


def _gpu_time(record: Callable[[], object], reps: int, rounds: int = 3) -> float | None:
    """GPU seconds per repetition of ``record``: ``reps`` back to back in one compute
    pass between two timestamps (no launch gaps, no host time), the least of ``rounds``;
    None without timestamp queries."""
    device = get_device()
    record()
    device.synchronize()
    best = None
    for _ in range(rounds):
        sec = device.gpu_seconds(lambda: [record() for _ in range(reps)])
        if sec is None:
            return None
        best = sec if best is None else min(best, sec)
    return None if best is None else best / reps


def _time_torch(torch: Any, fn: Callable[[], object], reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def _gpu_time_torch(torch: Any, fn: Callable[[], object], reps: int, rounds: int = 3) -> float:
    """CUDA-event seconds per repetition of ``fn`` (``reps`` back to back), the least
    of ``rounds``: the GPU's time, as `_gpu_time` measures asgrad's."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e-3)  # milliseconds
    return best / reps


def warm_up(seconds: float) -> None:
    """Keep the GPU busy for a while so its clocks are up before anything is timed."""
    device = get_device()
    n = 2048
    a = to_gpu(np.ones((n, n), np.float32))
    out = GpuArray.empty((n, n), np.float32)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            matmul_into(MatrixView(a), MatrixView(a), out)
        device.synchronize()


def tile(variant: str) -> str | None:
    """The tile forced for a benchmark variant (``auto``: what the lowering selects)."""
    return None if variant == "auto" else variant


def bench_matmul(sizes: list[int], variants: list[str], torch: Any) -> list[Row]:
    rows: list[Row] = []
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ga, gb = to_gpu(a), to_gpu(b)
        out = GpuArray.empty((n, n), np.float32)
        flops = 2.0 * n**3
        reps = max(2, min(50, int(2e12 / flops)))
        for variant in variants:
            chosen = tile(variant)
            start = time.perf_counter()
            if chosen is None:  # the default: tuned (measured now, once per bucket) or the rule's
                picked, splits = choose(MatrixView(ga), MatrixView(gb))
                chosen = f"{picked}/{splits}"
            tune_s = time.perf_counter() - start

            def run(
                variant: str = variant,
                ga: GpuArray = ga,
                gb: GpuArray = gb,
                out: GpuArray = out,
            ) -> None:
                matmul_into(MatrixView(ga), MatrixView(gb), out, tile(variant))

            wall = _time_gpu(run, reps)
            gpu = _gpu_time(run, reps)
            sec = wall if gpu is None else gpu  # GPU time where the adapter has timestamps
            check = ""
            if n <= 2048:
                ref = a[:64] @ b
                got = out.numpy()[:64]
                check = f"{np.abs(got - ref).max() / np.abs(ref).max():.1e}"
            rows.append(
                {
                    "bench": "matmul",
                    "impl": f"asgrad-wgsl-{variant}",
                    "tile": chosen,
                    "tune_s": round(tune_s, 3),
                    "n": n,
                    "ms": sec * 1e3,
                    "timing": "wall" if gpu is None else "gpu",
                    "tflops": flops / sec / 1e12,
                    "wall_tflops": flops / wall / 1e12,
                    "relerr": check,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        if torch is not None:
            ta = torch.from_numpy(a).cuda()
            tb = torch.from_numpy(b).cuda()

            def run_torch(ta: Any = ta, tb: Any = tb) -> object:
                return ta @ tb

            wall = _time_torch(torch, run_torch, reps)
            sec = _gpu_time_torch(torch, run_torch, reps)
            rows.append(
                {
                    "bench": "matmul",
                    "impl": "torch-cuda-fp32",
                    "n": n,
                    "ms": sec * 1e3,
                    "timing": "gpu",
                    "tflops": flops / sec / 1e12,
                    "wall_tflops": flops / wall / 1e12,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _wall_slope(run: Callable[[int], float], reps: int) -> float:
    """Seconds per repetition as the slope between ``reps`` and ``2 * reps`` repetitions.

    ``run(k)`` times k repetitions including one final wait; the difference removes
    the fixed costs (first submit, the wait, a readback) that a plain mean would
    spread over the repetitions.
    """
    return max(run(2 * reps) - run(reps), 1e-12) / reps


def bench_copy(mib: int, torch: Any, variants: bool) -> list[Row]:
    """Device-to-device copy bandwidth, counted the same way on both sides.

    Both sides copy the same ``mib`` MiB between two distinct device buffers, and
    both count ``2 * bytes`` (each byte read once and written once). ``gbps`` is
    GPU time: timestamp queries around one compute pass of ``reps`` copies for asgrad,
    CUDA events around ``reps`` ``copy_`` calls for PyTorch (``cudaMemcpyAsync``
    device to device); ``wall_gbps`` is host wall time, the slope between ``reps``
    and ``2 * reps`` copies (so neither side pays its fixed submit and wait costs).
    """
    rows: list[Row] = []
    nbytes = mib * 2**20
    n = nbytes // 4
    src = to_gpu(np.ones(n, np.float32))
    dst = GpuArray.empty((n,), np.float32)
    device = get_device()
    moved = 2 * nbytes  # read + write
    reps = 20

    def asgrad_wall(record: Callable[[], object]) -> Callable[[int], float]:
        def run(k: int) -> float:
            device.synchronize()
            start = time.perf_counter()
            for i in range(k):
                record()
                if i % 4 == 3:
                    device.flush()  # let the GPU start while the host records more
            device.synchronize()
            return time.perf_counter() - start

        return run

    configs: list[tuple[str, int, int | None]] = [("asgrad-wgsl", COPY_ITEMS, None)]
    if variants:
        configs += [
            (f"asgrad-wgsl-items{i}-wg{w or 'all'}", i, w)
            for i, w in ((1, None), (4, None), (8, None), (2, 2048), (2, 8192), (8, 4096))
        ]
    for impl, items, cap in configs:

        def record(items: int = items, cap: int | None = cap) -> None:
            copy_bytes(src, dst, nbytes, items=items, max_workgroups=cap)

        record()
        device.synchronize()
        gpu = device.gpu_seconds(lambda record=record: [record() for _ in range(reps)])  # type: ignore[misc]
        wall = _wall_slope(asgrad_wall(record), reps)
        row: Row = {"bench": "copy", "impl": impl, "mib": mib, "wall_gbps": moved / wall / 1e9}
        row["gbps"] = moved / (gpu / reps) / 1e9 if gpu else row["wall_gbps"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if dst.numpy()[-1] != 1.0:
        raise RuntimeError("the copy kernel did not copy")
    wall = _wall_slope(asgrad_wall(lambda: device.copy(src.buffer, dst.buffer, nbytes)), reps)
    rows.append(
        {
            "bench": "copy",
            "impl": "wgpu-copy_buffer",
            "mib": mib,
            "gbps": moved / wall / 1e9,
            "wall_gbps": moved / wall / 1e9,
        }
    )
    print(json.dumps(rows[-1]), flush=True)
    if torch is not None:
        tx = torch.ones(n, device="cuda")
        ty = torch.empty_like(tx)

        def torch_wall(k: int) -> float:
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(k):
                ty.copy_(tx)
            torch.cuda.synchronize()
            return time.perf_counter() - start

        ty.copy_(tx)
        torch.cuda.synchronize()
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(reps):
            ty.copy_(tx)
        end.record()
        end.synchronize()
        gpu = begin.elapsed_time(end) * 1e-3
        wall = _wall_slope(torch_wall, reps)
        rows.append(
            {
                "bench": "copy",
                "impl": "torch-cuda",
                "mib": mib,
                "gbps": moved / (gpu / reps) / 1e9,
                "wall_gbps": moved / wall / 1e9,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def bench_dispatch(count: int) -> list[Row]:
    """Host cost of recording one small elementwise dispatch (everything cached)."""
    device = get_device()
    x = to_gpu(np.ones(256, np.float32))
    out = GpuArray.empty((256,), np.float32)
    elementwise("x0 + 1.0", [x], out=out)
    device.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        elementwise("x0 + 1.0", [x], out=out)
    recorded = time.perf_counter() - start
    device.synchronize()
    total = time.perf_counter() - start
    small = to_gpu(np.ones(4, np.float32))
    start = time.perf_counter()
    for _ in range(20):
        small.numpy()
    readback = (time.perf_counter() - start) / 20
    row = {
        "bench": "dispatch",
        "impl": "asgrad",
        "count": count,
        "host_us_per_dispatch": recorded / count * 1e6,
        "us_per_dispatch_with_gpu": total / count * 1e6,
        "small_readback_us": readback * 1e6,
    }
    print(json.dumps(row), flush=True)
    return [row]


def bench_replay(count: int, reps: int = 5) -> list[Row]:
    """Host cost per dispatch of replaying captured commands (what a compiled step does).

    ``count`` small elementwise dispatches alternating two pipelines are captured once,
    then replayed ``reps`` times: through wgpu-native's C functions on raw handles
    (the default) and through wgpu-py's public methods (``ASGRAD_GPU_FAST_REPLAY=0``).
    The host time stops before the final wait for the GPU; it includes the submits a
    replay makes (every 32, 64... dispatches), ``encode_us`` leaves them out.
    """
    from asgrad.gpu.device.buffers import ScopedPool
    from asgrad.gpu.plan import capture

    device = get_device()
    x = to_gpu(np.ones(256, np.float32))
    out = GpuArray.empty((256,), np.float32)
    with capture.capturing(device, ScopedPool(device.pool)) as captured:
        for i in range(count):
            elementwise("x0 * 2.0" if i % 2 else "x0 + 1.0", [x], out=out)
    rows: list[Row] = []
    paths = (("asgrad-replay-native", capture._NATIVE), ("asgrad-replay-wgpu-py", None))
    for impl, native in paths:
        if impl.endswith("native") and native is None:
            continue
        saved, capture._NATIVE = capture._NATIVE, native
        chunk = device.chunk_dispatches
        try:
            capture.replay(device, captured.commands)
            device.synchronize()
            start = time.perf_counter()
            for _ in range(reps):
                capture.replay(device, captured.commands)
            host = time.perf_counter() - start
            device.synchronize()
            device.chunk_dispatches = 1 << 30  # no submit inside: encoding alone
            start = time.perf_counter()
            for _ in range(reps):
                capture.replay(device, captured.commands)
            encode = time.perf_counter() - start
            device.synchronize()
        finally:
            capture._NATIVE = saved
            device.chunk_dispatches = chunk
        row = {
            "bench": "replay",
            "impl": impl,
            "count": count,
            "host_us_per_dispatch": host / (reps * count) * 1e6,
            "encode_us_per_dispatch": encode / (reps * count) * 1e6,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _workload_plan(name: str, steps: int, precision: str = "float32") -> tuple[Any, Any]:
    """A WORKLOADS.md workload on the GPU after ``steps`` steps, and its plan."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    workloads = importlib.import_module("asgrad_workloads")
    workload = workloads.build(name, "gpu", precision)
    if steps == 0:
        from asgrad.gpu.plan import build_plan

        executable = workload.program.executable
        return workload, build_plan(executable.schedule, workload.feeds, get_device())
    for _ in range(steps):
        workload.step()
    plans = workload.program.executable._plans  # the compiled plan of these feeds
    (plan,) = plans.values()
    return workload, plan


def _kinds_line(commands: Any) -> str:
    kinds = count_kinds(commands)
    return ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())


def dispatch_counts(name: str, precision: str = "float32") -> Row:
    """Dispatches of one training step of a workload by kind (no run: the plan only)."""
    _, plan = _workload_plan(name, 0, precision)
    row: Row = {"bench": "dispatches", "workload": name, "dispatches": len(plan.commands)}
    if precision != "float32":
        name = f"{name} ({precision})"
    row.update(count_kinds(plan.commands))
    print(f"# {name}: {len(plan.commands)} dispatches: {_kinds_line(plan.commands)}", flush=True)
    return row


def profile_workload(name: str, top: int, precision: str = "float32") -> list[Row]:
    """Per-kernel GPU time of one training step of a WORKLOADS.md workload.

    Each captured dispatch is timed by :func:`asgrad.gpu.plan.capture.profile` (run alone,
    then repeated in one submit: the submit and wait cost cancels out); kernels are
    grouped by pipeline and by kind. The step time is the launched steps' wall time.
    """
    from asgrad.gpu.plan.dispatch_kinds import kernel_kind

    workload, plan = _workload_plan(name, 2, precision)
    if precision != "float32":
        name = f"{name} ({precision})"
    device = get_device()
    totals: dict[str, list[float]] = {}
    kinds: dict[str, float] = {}
    for label, seconds in profile(device, plan.commands):
        entry = totals.setdefault(label, [0.0, 0.0])
        entry[0] += 1
        entry[1] += seconds
        kind = kernel_kind(label)
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    workload.sync()
    start = time.perf_counter()
    for _ in range(20):
        workload.step()
    workload.sync()
    step_seconds = (time.perf_counter() - start) / 20
    rows: list[Row] = [
        {
            "bench": "profile",
            "workload": name,
            "kernel": label,
            "launches": int(count),
            "ms": seconds * 1e3,
        }
        for label, (count, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]
    ]
    kernel_ms = sum(v[1] for v in totals.values()) * 1e3
    print(
        f"# {name}: {len(plan.commands)} dispatches, step {step_seconds * 1e3:.2f} ms, "
        f"sum of kernels {kernel_ms:.2f} ms",
        flush=True,
    )
    print(f"#   by kind: {_kinds_line(plan.commands)}", flush=True)
    by_kind = sorted(kinds.items(), key=lambda kv: -kv[1])
    print("#   time by kind: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in by_kind))
    for row in rows:
        print(f"#   {row['ms']:8.3f} ms {row['launches']:5d}x  {row['kernel']}", flush=True)
    return rows


# The kinds of kernel `bench_rows` times: row programs, elementwise kernels, column sums.
_ROW_KINDS = ("softmax", "norm", "reduction", "elementwise", "column reduction")


def bench_rows(name: str, steps: int, reps: int, torch: Any) -> list[Row]:
    """GPU microseconds and GB/s of the row and elementwise kernels of one training
    step of a workload, each timed alone: ``reps`` launches of the plan's own command
    (its pipeline and bind group, after ``steps`` steps) back to back in one compute
    pass between two timestamps, the least of three rounds. Bytes are the storage
    buffers it binds (read and written once each, as a kernel at bandwidth would);
    ``copy_us`` is the vec4 copy kernel moving the same bytes (half read, half
    written) timed the same way, so ``vs_copy`` near 1 means at the copy's bandwidth.
    With PyTorch CUDA, its kernels for the same shapes are timed too (CUDA events)."""
    from asgrad.gpu.plan.capture import replay
    from asgrad.gpu.plan.dispatch_kinds import kernel_kind

    device = get_device()
    bound: dict[int, int] = {}  # id(bind group) -> bytes of the storage buffers it binds
    dispatch = device.dispatch

    def recording(pipe: Any, buffers: Any, groups: tuple[int, int, int]) -> None:
        dispatch(pipe, buffers, groups)
        group = device.pipelines.bind_group(pipe, buffers)
        kinds = zip(pipe.bindings, buffers, strict=True)
        bound[id(group)] = sum(b.size for kind, b in kinds if kind in ("read", "write"))

    device.dispatch = recording  # type: ignore[method-assign]
    try:
        workload, plan = _workload_plan(name, steps)
    finally:
        del device.dispatch
    workload.sync()
    first: dict[str, Any] = {}
    for command in plan.commands:
        label = str(command[3])
        if kernel_kind(label) in _ROW_KINDS and label not in first:
            first[label] = command
    big = max(bound.values(), default=4)
    src = GpuArray.empty((big // 8 + 4,), np.float32)
    dst = GpuArray.empty((big // 8 + 4,), np.float32)
    rows: list[Row] = []
    print(f"# {name}: {len(first)} kernels, {reps} launches each, GPU timestamps", flush=True)
    print(f"# {'us':>8s} {'MB':>7s} {'GB/s':>6s} {'copy us':>8s} {'vs copy':>7s}  kernel")
    for label, command in first.items():
        moved = bound.get(id(command[1]), 0)
        sec = _gpu_time(lambda c=command: replay(device, [c] * reps, 1 << 30), 1) or 0.0
        copy_sec = 0.0
        if moved >= 64:
            half = moved // 2 // 16 * 16
            copy_sec = _gpu_time(lambda h=half: [copy_bytes(src, dst, h) for _ in range(reps)], 1)
            copy_sec = copy_sec or 0.0
        sec, copy_sec = sec / reps, copy_sec / reps
        row: Row = {
            "bench": "rows",
            "workload": name,
            "kind": kernel_kind(label),
            "kernel": label,
            "groups": list(command[2]),
            "us": sec * 1e6,
            "mb": moved / 1e6,
            "gb_per_s": moved / sec / 1e9 if sec else 0.0,
            "copy_us": copy_sec * 1e6,
            "vs_copy": copy_sec / sec if sec else 0.0,
        }
        rows.append(row)
        print(
            f"# {row['us']:8.1f} {row['mb']:7.1f} {row['gb_per_s']:6.0f} {row['copy_us']:8.1f} "
            f"{row['vs_copy']:7.2f}  {label[:110]}",
            flush=True,
        )
        print(json.dumps(row), flush=True)
    if torch is not None:
        rows += _torch_rows(torch, reps)
    return rows


def _torch_rows(torch: Any, reps: int) -> list[Row]:
    """PyTorch CUDA's kernels for transformer_large's rows and elementwise shapes."""
    f = torch.nn.functional
    aten = torch.ops.aten
    cuda = {"device": "cuda", "dtype": torch.float32}
    s = torch.randn(32, 8, 256, 256, **cuda)
    mask = torch.triu(torch.full((256, 256), -1e9, **cuda), 1)
    y = torch.softmax(s, -1)
    x = torch.randn(8192, 512, **cuda)
    w, b = torch.randn(512, **cuda), torch.randn(512, **cuda)
    _, mean, rstd = aten.native_layer_norm(x, [512], w, b, 1e-5)
    h = torch.randn(8192, 2048, **cuda)
    cases: list[tuple[str, Callable[[], object], int]] = [
        ("softmax [32,8,256,256]", lambda: torch.softmax(s, -1), 2 * s.nbytes),
        (
            "softmax of scaled masked scores (3 kernels)",
            lambda: torch.softmax(s * 0.125 + mask, -1),
            2 * s.nbytes,
        ),
        (
            "softmax backward",
            lambda: aten._softmax_backward_data(s, y, -1, torch.float32),
            3 * s.nbytes,
        ),
        ("layer_norm [8192,512]", lambda: f.layer_norm(x, (512,), w, b), 2 * x.nbytes),
        (
            "layer_norm backward (input, weight, bias)",
            lambda: aten.native_layer_norm_backward(
                x, x, [512], mean, rstd, w, b, [True, True, True]
            ),
            3 * x.nbytes,
        ),
        ("gelu [8192,2048]", lambda: f.gelu(h), 2 * h.nbytes),
        ("gelu backward", lambda: aten.gelu_backward(h, h), 3 * h.nbytes),
        ("add [8192,512]", lambda: x + x, 3 * x.nbytes),
    ]
    rows: list[Row] = []
    for case, fn, moved in cases:
        sec = _gpu_time_torch(torch, fn, reps)
        row: Row = {"bench": "rows", "impl": "torch-cuda", "kernel": case, "us": sec * 1e6}
        row.update(mb=moved / 1e6, gb_per_s=moved / sec / 1e9)
        rows.append(row)
        print(f"# {row['us']:8.1f} {row['mb']:7.1f} {row['gb_per_s']:6.0f}  torch {case}")
        print(json.dumps(row), flush=True)
    return rows


# WGSL of float32 GELU (tanh-free, as the plan renders it) over ``v`` (an f32 value).
_GELU_F32 = "((0.5 * {v}) * (1.0 + asg_erf(({v} * 0.7071067811865475))))"


def bench_half_elementwise(n: int, reps: int = 20) -> list[Row]:
    """GPU microseconds of elementwise kernels over ``n`` elements, float32 against
    float16 storage, to tell what makes a float16 kernel slow where it moves half the
    bytes: the 2-byte loads and stores (``copy``), numpy-exact narrowing (``asg_f2h``,
    which maps overflow to infinity) against WGSL's ``f16()``, and float16 arithmetic
    against the same chain computed in float32 from widened loads (GELU)."""
    rng = np.random.default_rng(0)
    x32 = to_gpu(rng.standard_normal(n).astype(np.float32))
    y32 = to_gpu(rng.standard_normal(n).astype(np.float32))
    x16 = to_gpu(rng.standard_normal(n).astype(np.float16))
    y16 = to_gpu(rng.standard_normal(n).astype(np.float16))
    f32, f16 = np.float32, np.float16
    gelu_h = "(0.5h * x0) * (1.0h + asg_f2h(asg_erf(asg_h2f((x0 * 0.70703125h)))))"
    cases: list[tuple[str, str, list[Any], Any]] = [
        ("copy f32", "x0", [x32], f32),
        ("copy f16", "x0", [x16], f16),
        ("add f32", "x0 + x1", [x32, y32], f32),
        ("add f16", "x0 + x1", [x16, y16], f16),
        ("add f16 + f32 (asg_f2h)", "x0 + asg_f2h(x1)", [x16, y32], f16),
        ("add f16 + f32 (f16())", "x0 + f16(x1)", [x16, y32], f16),
        ("add f16 in f32 (asg_f2h)", "asg_f2h(f32(x0) + f32(x1))", [x16, y16], f16),
        ("add f16 in f32 (f16())", "f16(f32(x0) + f32(x1))", [x16, y16], f16),
        ("gelu f32", _GELU_F32.format(v="x0"), [x32], f32),
        ("gelu f16 (f16 arithmetic)", gelu_h, [x16], f16),
        ("gelu f16 in f32 (asg_f2h)", f"asg_f2h({_GELU_F32.format(v='f32(x0)')})", [x16], f16),
        ("gelu f16 in f32 (f16())", f"f16({_GELU_F32.format(v='f32(x0)')})", [x16], f16),
    ]
    rows: list[Row] = []
    for name, expr, ins, dtype in cases:
        out = elementwise(expr, ins, dtype)

        def record(expr: str = expr, ins: list[Any] = ins, out: Any = out) -> None:
            elementwise(expr, ins, out=out)

        sec = _gpu_time(record, reps)
        moved = sum(a.nbytes for a in ins) + out.nbytes
        row: Row = {"bench": "half_elementwise", "case": name, "n": n}
        if sec is not None:
            row.update(us=sec * 1e6, gb_per_s=moved / sec / 1e9)
            print(f"# {name:32s} {sec * 1e6:9.1f} us  {moved / sec / 1e9:7.1f} GB/s", flush=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (lavapipe)")
    parser.add_argument(
        "--variants", action="store_true", help="also time copy-kernel variants (tuning)"
    )
    parser.add_argument("--json", help="also write all rows to this file")
    parser.add_argument(
        "--profile", metavar="WORKLOAD", help="per-kernel times of a training step instead"
    )
    parser.add_argument("--top", type=int, default=25, help="kernels listed by --profile")
    parser.add_argument(
        "--dispatches",
        metavar="WORKLOAD",
        help="dispatches of a training step by kind, without running it (fast on lavapipe)",
    )
    parser.add_argument(
        "--precision",
        default="float32",
        help="float32, mixed, or both comma-separated: the transformers' step for "
        "--dispatches and --profile (mixed: precision='mixed' under a GradScaler)",
    )
    parser.add_argument(
        "--half-elementwise",
        type=int,
        metavar="N",
        help="time float32 and float16 elementwise kernels over N elements instead",
    )
    parser.add_argument(
        "--rows",
        metavar="WORKLOAD",
        help="time the row and elementwise kernels of a training step alone instead "
        "(GB/s against a copy of the same bytes; PyTorch CUDA's beside them)",
    )
    parser.add_argument(
        "--no-subgroups",
        action="store_true",
        help="build kernels as for a device without the subgroup feature (an A/B)",
    )
    parser.add_argument(
        "--items",
        type=int,
        help="elements per invocation of the elementwise kernels over contiguous operands "
        "(an A/B of asgrad.gpu.lowering.elementwise.ITEMS)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=2,
        help="steps run before --rows times the plan's kernels (0: the plan only, lavapipe)",
    )
    args = parser.parse_args()
    precisions = args.precision.split(",")
    if args.half_elementwise:
        get_device()
        bench_half_elementwise(args.half_elementwise)
        return
    if args.no_subgroups:
        import dataclasses

        device = get_device()
        caps = device.capabilities
        features = tuple(f for f in caps.features if f != "subgroup")
        device.capabilities = dataclasses.replace(caps, features=features)
    if args.items:
        importlib.import_module("asgrad.gpu.lowering.elementwise").ITEMS = args.items
    if args.rows:
        get_device()
        bench_rows(args.rows, args.steps, 3 if args.quick else 50, None if args.quick else _torch())
        return
    if args.dispatches:
        get_device()
        for name in args.dispatches.split(","):
            for precision in precisions:
                dispatch_counts(name, precision)
        return
    if args.profile:
        get_device()
        for name in args.profile.split(","):
            for precision in precisions:
                profile_workload(name, args.top, precision)
        return
    device = get_device()
    caps = device.capabilities
    print(
        f"# adapter: {caps.adapter} via {caps.backend} ({caps.adapter_type})",
        flush=True,
    )
    torch = None if args.quick else _torch()
    if torch is not None:
        print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    on = tuning.enabled(device)
    where = tuning.TileCache.for_device(device).path if on else "off"
    print(f"# matmul tuning ({tuning.ENV}): {where}", flush=True)
    sizes = [128, 256] if args.quick else [256, 512, 1024, 2048, 4096, 8192]
    variants = ["auto", "128"]
    warm_up(0.2 if args.quick else 2.0)
    rows = bench_matmul(sizes, variants, torch)
    rows += bench_copy(4 if args.quick else 256, torch, args.variants)
    rows += bench_dispatch(200 if args.quick else 2000)
    rows += bench_replay(256 if args.quick else 1024)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"adapter": caps.adapter, "backend": caps.backend, "rows": rows}, fh)
    print("\n| bench | impl | size | result |\n|---|---|---|---|")
    for r in rows:
        if r["bench"] == "matmul":
            tile = f" (`{r['tile']}`)" if r.get("tile") else ""
            if r.get("tune_s"):  # the tile was measured for this size just now
                tile += f", tuned in {r['tune_s']:.1f} s"
            print(
                f"| matmul | {r['impl']}{tile} | {r['n']}^3 | {r['tflops']:.2f} TFLOP/s "
                f"({r['timing']} time; wall {r['wall_tflops']:.2f}) |"
            )
        elif r["bench"] == "copy":
            print(
                f"| copy | {r['impl']} | {r['mib']} MiB | {r['gbps']:.0f} GB/s "
                f"(wall {r['wall_gbps']:.0f}) |"
            )
        elif r["bench"] == "replay":
            print(
                f"| replay | {r['impl']} | {r['count']} | "
                f"{r['host_us_per_dispatch']:.2f} us host/dispatch with submits, "
                f"{r['encode_us_per_dispatch']:.2f} encoding alone |"
            )
        else:
            print(
                f"| dispatch | {r['impl']} | {r['count']} | "
                f"{r['host_us_per_dispatch']:.1f} us host/dispatch, "
                f"{r['small_readback_us']:.0f} us small readback |"
            )


if __name__ == "__main__":
    main()
