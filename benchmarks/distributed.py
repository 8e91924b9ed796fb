"""Data-parallel scaling on this machine: samples/s for 1, 2, 4 ranks and the all-reduce cost.

    python benchmarks/distributed.py [--ranks 1,2,4] [--models cnn,transformer] [--steps 30]

For each model and rank count it starts ``mpiexec -n N`` on this script's worker:
every rank trains with a fixed batch per rank (weak scaling: the global batch grows
with N) through :class:`asgrad.nn.distributed.DistributedStep`, one BLAS thread per
rank. A step is timed in its three parts: the gradient program, the reduction of the
buckets (``MPI_Iallreduce`` started for every bucket, then waited for, plus the
scaling) and the update program. The reduction's time includes waiting for the
slowest rank; ``allreduce_only_ms`` is the same all-reduce alone, right after a
barrier (the transport's cost). Rank 0 prints one JSON line per run; a table follows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARMUP = 3


def _import_path() -> None:
    """Make the workspace's packages importable when they are not installed."""
    for src in [*sorted((ROOT / "packages").glob("*/src")), ROOT / "examples" / "src"]:
        if str(src) not in sys.path:
            sys.path.insert(0, str(src))


def worker(model_name: str, steps: int) -> None:
    _import_path()
    import numpy as np

    from asgrad import nn
    from asgrad.nn import distributed as dist
    from asgrad.tensor import Graph

    dist.init()
    rank, ranks = dist.rank(), dist.world_size()
    rng = np.random.default_rng([0, rank])
    g = Graph("bench")
    if model_name == "cnn":
        from asgrad.examples.cnn import build_model

        batch = 32
        model = build_model((8, 8), seed=0)
        x = g.input("x", (batch, 1, 8, 8))
        y = g.input("y", (batch,), "int64")
        loss = nn.cross_entropy(model(x), y)
        opt: nn.Optimizer = nn.Adam(model.parameters(), lr=1e-3)

        def feeds() -> dict[str, Any]:
            return {
                "x": rng.random((batch, 1, 8, 8), dtype=np.float32),
                "y": rng.integers(0, 10, batch),
            }
    else:
        from asgrad.examples.transformer import CharTransformer

        batch, context = 8, 64
        model = CharTransformer(96, context=context)
        x = g.input("x", (batch, context), "int64")
        y = g.input("y", (batch, context), "int64")
        loss = nn.cross_entropy(model(x), y, axis=-1)
        opt = nn.AdamW(model.parameters(), lr=1e-3, clip_grad_norm=1.0)

        def feeds() -> dict[str, Any]:
            return {
                "x": rng.integers(0, 96, (batch, context)),
                "y": rng.integers(0, 96, (batch, context)),
            }

    dist.broadcast_variables(model.parameters())
    step = dist.DistributedStep(opt, loss)
    for _ in range(WARMUP):
        step(feeds())
    parts = {"gradients": 0.0, "reduce": 0.0, "update": 0.0}
    dist.barrier()
    began = time.perf_counter()
    for _ in range(steps):
        batch_feeds = feeds()
        t0 = time.perf_counter()
        buckets = step.gradients(batch_feeds)[step.outputs :]
        t1 = time.perf_counter()
        pending = [dist.all_reduce_start(np.ascontiguousarray(b)) for b in buckets]
        reduced = {f"bucket{k}": p.wait() * (1.0 / ranks) for k, p in enumerate(pending)}
        t2 = time.perf_counter()
        step.update(reduced)
        t3 = time.perf_counter()
        parts["gradients"] += t1 - t0
        parts["reduce"] += t2 - t1
        parts["update"] += t3 - t2
    dist.barrier()
    wall = time.perf_counter() - began
    # The transport alone: the same buckets, all ranks lined up by a barrier first.
    alone = []
    for _ in range(10):
        dist.barrier()
        t0 = time.perf_counter()
        for p in [dist.all_reduce_start(np.ascontiguousarray(b)) for b in buckets]:
            p.wait()
        alone.append(time.perf_counter() - t0)
    times = dist.all_reduce(np.array([parts[k] for k in parts] + [min(alone)]), "mean")
    if rank == 0:
        row = {
            "model": model_name,
            "ranks": ranks,
            "batch_per_rank": batch,
            "parameters": model.num_parameters(),
            "gradient_bytes": int(sum(b.nbytes for b in buckets)),
            "buckets": len(buckets),
            "steps": steps,
            "samples_per_s": round(ranks * batch * steps / wall, 1),
            "step_ms": round(1000 * wall / steps, 2),
            "gradients_ms": round(1000 * times[0] / steps, 2),
            "reduce_ms": round(1000 * times[1] / steps, 3),
            "update_ms": round(1000 * times[2] / steps, 2),
            "allreduce_only_ms": round(1000 * times[3], 3),
        }
        print(json.dumps(row), flush=True)


def launcher() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise SystemExit("error: no mpiexec; install mpi4py and mpich (pip install mpich)")
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default 1,2,4)")
    p.add_argument("--models", default="cnn,transformer", help="cnn and/or transformer")
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (default 30)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.steps)
        return 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX"))}
    env.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
    rows = []
    for model in args.models.split(","):
        for n in [int(r) for r in args.ranks.split(",")]:
            command = [launcher(), "-n", str(n), sys.executable, __file__, "--worker", model]
            done = subprocess.run(
                [*command, "--steps", str(args.steps)],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not lines:
                print(done.stdout + done.stderr, file=sys.stderr)
                return 1
            print(lines[0], flush=True)
            rows.append(json.loads(lines[0]))
    print()
    print(
        "| model | ranks | batch/rank | samples/s | step ms | gradients ms | reduce ms |"
        " update ms | all-reduce alone ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['ranks']} | {r['batch_per_rank']} | {r['samples_per_s']} |"
            f" {r['step_ms']} | {r['gradients_ms']} | {r['reduce_ms']} | {r['update_ms']} |"
            f" {r['allreduce_only_ms']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
