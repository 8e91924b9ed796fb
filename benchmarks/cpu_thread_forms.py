"""Which thread form each compiled CPU kernel of a workload took, and why.

    python benchmarks/cpu_thread_forms.py transformer_large [--steps 8] [--kernels] [--json F]
        [--batch B]

Prints what decides the kernels' threads on this machine (cores, CPU quota, Numba's
thread count and threading layer, ``OMP_WAIT_POLICY``, ``OPENBLAS_THREAD_TIMEOUT``),
then builds the workload as ``run.py`` does (the compiled path from the first step),
runs ``--steps`` steps and prints each step's time and every measured choice of the
serial or parallel form (`asgrad.tensor.cpu.jit.threads.report`: the kernel's module,
the size, the threads, the form, and the median times that decided it).

``--kernels`` first times three kernels at transformer_large's shapes (GELU's gradient
over ``[32, 256, 2048]``, the masked softmax over ``[32, 8, 256, 256]``, a bias
gradient's sum of ``[8192, 2048]``), each form forced, alone and right after a
``8192 x 512 x 2048`` matrix product (as in the step, where BLAS's threads have just
finished), median of ``--rounds``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _environment() -> dict[str, Any]:
    """What decides the kernels' threads here."""
    import numba
    import numpy as np

    from asgrad.tensor.cpu.jit import kernels_sum

    kernels_sum._site.force = "parallel"  # one parallel call starts the threading layer
    kernels_sum.leading_sum(np.ones((256, 256), np.float32), 256)
    kernels_sum._site.force = None
    quota = ""
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        try:
            quota = Path(path).read_text().strip()
            break
        except OSError:
            continue
    return {
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cgroup_cpu_max": quota,
        "numba_threads": numba.get_num_threads(),
        "threading_layer": numba.threading_layer(),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "load": os.getloadavg(),
    }


def _kernels(rounds: int) -> list[dict[str, Any]]:
    """Each of three kernels, serial and parallel, alone and after a product (ms)."""
    import numpy as np

    from asgrad.tensor.cpu.jit import kernels_attention, kernels_sum
    from jit_kernels import _compiled

    rng = np.random.default_rng(0)

    def f(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    gelu = _compiled("gelu_backward", [f(32, 256, 2048), f(32, 256, 2048)], {"approximate": "none"})
    gelu_site = next(
        sys.modules[c.cell_contents.__module__]._site
        for c in gelu.__closure__ or ()
        if str(getattr(c.cell_contents, "__module__", "")).startswith("asgrad_loop")
    )
    scores = f(32, 8, 256, 256)
    mask = np.triu(np.full((256, 256), -1e9, np.float32), 1)
    probs = np.empty_like(scores)
    grads = f(8192, 2048)
    cases: list[tuple[str, Any, Callable[[], Any]]] = [
        ("gelu_backward [32, 256, 2048]", gelu_site, gelu),
        (
            "masked softmax [32, 8, 256, 256]",
            kernels_attention._site,
            lambda: kernels_attention.masked_softmax(scores, 0.125, mask, out=probs),
        ),
        (
            "leading_sum [8192, 2048]",
            kernels_sum._site,
            lambda: kernels_sum.leading_sum(grads, 2048),
        ),
    ]
    a, b = f(8192, 512), f(512, 2048)
    product = np.empty((8192, 2048), np.float32)
    rows = []
    for name, site, call in cases:
        times: dict[str, list[float]] = {}
        for form in ("serial", "parallel"):
            site.force = form
            call()  # compiles
        for r in range(rounds):
            for after in (False, True):
                for form in ("serial", "parallel") if r % 2 == 0 else ("parallel", "serial"):
                    site.force = form
                    if after:
                        np.matmul(a, b, out=product)
                    else:
                        time.sleep(0.05)
                    start = time.perf_counter()
                    call()
                    label = f"{form}{' after product' if after else ''}"
                    times.setdefault(label, []).append(time.perf_counter() - start)
        site.force = None
        row = {"kernel": name, **{k: statistics.median(v) * 1e3 for k, v in times.items()}}
        rows.append(row)
        print(
            f"  {name:34s} "
            + "  ".join(f"{k} {v:.2f}" for k, v in row.items() if k != "kernel")
            + " ms",
            flush=True,
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload", nargs="?", default="transformer_large")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--kernels", action="store_true", help="time three kernels alone first")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", default="", help="write everything to this file too")
    p.add_argument("--batch", type=int, default=0, help="a transformer's batch (0: its own)")
    args = p.parse_args(argv)
    os.environ.setdefault("ASGRAD_CPU_JIT", "1")

    import asgrad.tensor  # noqa: F401  # before numpy loads, as an asgrad program does

    result: dict[str, Any] = {"environment": _environment()}
    print("environment:", json.dumps(result["environment"]), flush=True)
    if args.kernels:
        print(f"kernels alone (median of {args.rounds}, ms):", flush=True)
        result["kernels"] = _kernels(args.rounds)
    if args.steps > 0:
        result.update(_workload(args.workload, args.steps, args.batch))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _workload(name: str, count: int, batch: int = 0) -> dict[str, Any]:
    """``count`` steps of workload ``name``, then the thread choices made."""
    import asgrad_workloads
    from asgrad.tensor.cpu.jit import threads

    start = time.perf_counter()
    if batch:
        w = asgrad_workloads.transformer("cpu", large=name == "transformer_large", batch=batch)
    else:
        w = asgrad_workloads.build(name, "cpu")
    print(f"{name}: built in {time.perf_counter() - start:.1f} s", flush=True)
    steps = []
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout` stops it: report what it has
    try:
        for i in range(count):
            start = time.perf_counter()
            w.step()
            w.sync()
            steps.append(time.perf_counter() - start)
            print(f"  step {i + 1}: {steps[-1] * 1e3:.1f} ms", flush=True)
    except KeyboardInterrupt:
        print(f"  stopped after {len(steps)} steps", flush=True)
    rows = sorted(threads.report(), key=lambda r: (-r["size"], r["kernel"]))
    print(f"thread forms ({len(rows)} keys; ms are the medians that decided):")
    for r in rows:
        times = f"({r['source']})"
        if "serial_ms" in r:
            par = r["parallel_ms"]
            times = f"serial {r['serial_ms']:.3f}" + (
                f" parallel {par:.3f}" if par is not None else " (probes: too quick)"
            )
        if "calls" in r:
            times = f"{r['calls']} calls"
        print(
            f"  {r['kernel'][-40:]:40s} {r['size']:>10d}"
            f" x{r['threads']:<3d} {r['form']:10s} {times}"
        )
    return {"steps_ms": [s * 1e3 for s in steps], "forms": rows}


if __name__ == "__main__":
    sys.exit(main())
