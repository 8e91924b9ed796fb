"""The transformer workloads trained in float32 and with ``precision="mixed"``.

    python benchmarks/mixed_precision.py [--workloads transformer,transformer_large]
                                         [--steps 30] [--jax]

For each workload of ``asgrad_workloads`` (same weights, same batch), trains the float32
step and the mixed-precision step (float16 products, float32 master weights, a
`asgrad.nn.GradScaler`) on the GPU for ``--steps`` steps each, and prints one JSON line
per run: steps/s over the steps after the first two, the losses of the first and last
step and the largest difference between the two runs' loss curves, and memory: the
planned activations kept for the backward (``program.memory()``) and the step's device
bytes (its plan's buffers plus variables, state and feeds). With ``--jax``, JAX's jitted
step of the same workload at float32 and with its parameters cast to bfloat16 for the
forward and backward (the usual ``jmp`` policy: float32 parameters and optimizer,
bfloat16 compute), steps/s and ``peak_bytes_in_use``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _asgrad(name: str, precision: str, steps: int) -> dict[str, Any]:
    import asgrad_workloads

    w = asgrad_workloads.transformer("gpu", large=name == "transformer_large", precision=precision)
    losses = [float(w.step()) for _ in range(2)]
    start = time.perf_counter()
    for _ in range(steps - 2):
        w.step()
    w.sync()
    rate = (steps - 2) / (time.perf_counter() - start)
    losses.append(float(w.last))
    plan = w.program.memory()
    held = plan.parameters + plan.state + plan.inputs
    device = held + w.program.executable.transient_bytes(w.feeds)
    return {
        "workload": name,
        "framework": "asgrad",
        "precision": precision,
        "steps_per_s": rate,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "activations_mib": plan.activations / 2**20,
        "planned_peak_mib": plan.peak / 2**20,
        "device_mib": device / 2**20,
    }


def _jax(name: str, compute: str, steps: int) -> dict[str, Any]:
    import jax_workloads

    jax = jax_workloads.load_jax()
    if jax is None:
        return {"workload": name, "framework": "jax", "skipped": "JAX is not importable"}
    step, _, sync = jax_workloads.build(name, None, compute)
    values = [step(), step()]
    sync(values[-1])
    start = time.perf_counter()
    for _ in range(steps - 2):
        values.append(step())
    sync(values[-1])
    rate = (steps - 2) / (time.perf_counter() - start)
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return {
        "workload": name,
        "framework": "jax",
        "precision": compute,
        "steps_per_s": rate,
        "loss_first": float(values[0]),
        "loss_last": float(values[-1]),
        "peak_gpu_mib": None if peak is None else peak / 2**20,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--workloads", default="transformer,transformer_large")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--jax", action="store_true", help="JAX at float32 and bfloat16 too")
    args = p.parse_args(argv)
    os.environ.setdefault("ASGRAD_CPU_JIT", "0")
    for name in args.workloads.split(","):
        for precision in ("float32", "mixed"):
            print(json.dumps(_asgrad(name, precision, args.steps)), flush=True)
        if args.jax:
            for compute in ("float32", "bfloat16"):
                print(json.dumps(_jax(name, compute, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
