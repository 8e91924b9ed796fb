"""Data-parallel scaling: samples/s per rank count, scaling efficiency, time in reduction.

    python benchmarks/distributed.py [--ranks 1,2,4] [--models cnn,transformer] [--steps 30]
        [--backend cpu|gpu] [--overlap both|on|off] [--bucket-mb 25]

For each model, overlap setting and rank count it starts ``mpiexec -n N`` on this
script's worker: every rank trains with a fixed batch per rank (weak scaling: the
global batch grows with N) through :class:`asgrad.nn.distributed.DistributedStep`, one
BLAS thread per rank, on ``--backend`` (each rank opens the GPU adapter of its local
rank). ``--overlap on`` splits the gradient program at the buckets so each bucket's
all-reduce starts while the backward pass goes on; ``off`` reduces every bucket after
it; ``both`` runs each. Per run it reports samples/s over all ranks, the step time,
``reduce_wait_ms`` (the time a step waits for its all-reduces once its gradients are
done: the part of the reduction not hidden behind the backward pass, including
waiting for the slowest rank) and ``allreduce_only_ms`` (the same buckets all-reduced
alone right after a barrier: the transport's cost). ``efficiency`` is samples/s at N
ranks over N times samples/s at one rank of the same model and setting (1.0: linear
scaling). Rank 0 prints one JSON line per run; a table follows.

On a machine with two GPUs: ``--ranks 1,2 --backend gpu --overlap both``.
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


def worker(model_name: str, steps: int, backend: str, overlap: bool, bucket_mb: float) -> None:
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
    step = dist.DistributedStep(
        opt, loss, backend=backend, overlap=overlap, bucket_bytes=int(bucket_mb * 2**20)
    )
    for _ in range(WARMUP):
        step(feeds())
    waited = 0.0
    dist.barrier()
    began = time.perf_counter()
    for _ in range(steps):
        float(step(feeds())[0])
        waited += step.reduce_seconds
    dist.barrier()
    wall = time.perf_counter() - began
    # The transport alone: buckets of the same sizes, all ranks lined up by a barrier first.
    buckets = [np.ones(n, np.float32) for n in step.sizes]
    alone = []
    for _ in range(10):
        dist.barrier()
        t0 = time.perf_counter()
        for p in [dist.all_reduce_start(b) for b in buckets]:
            p.wait()
        alone.append(time.perf_counter() - t0)
    times = dist.all_reduce(np.array([waited, min(alone)]), "mean")
    if rank == 0:
        row = {
            "model": model_name,
            "backend": step.backend,
            "overlap": step.overlap,
            "ranks": ranks,
            "batch_per_rank": batch,
            "parameters": model.num_parameters(),
            "gradient_bytes": int(sum(b.nbytes for b in buckets)),
            "buckets": len(buckets),
            "steps": steps,
            "samples_per_s": round(ranks * batch * steps / wall, 1),
            "step_ms": round(1000 * wall / steps, 2),
            "reduce_wait_ms": round(1000 * times[0] / steps, 3),
            "allreduce_only_ms": round(1000 * times[1], 3),
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
    p.add_argument("--backend", default="cpu", choices=("cpu", "gpu"), help="default cpu")
    p.add_argument("--overlap", default="both", choices=("both", "on", "off"), help="both")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="bucket size (default 25)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.backend, args.overlap == "on", args.bucket_mb)
        return 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX"))}
    env.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1"))
    settings = ["on", "off"] if args.overlap == "both" else [args.overlap]
    rows: list[dict[str, Any]] = []
    for model in args.models.split(","):
        for overlap in settings:
            for n in [int(r) for r in args.ranks.split(",")]:
                command = [launcher(), "-n", str(n), sys.executable, __file__, "--worker", model]
                options = ["--backend", args.backend, "--overlap", overlap, "--steps"]
                options += [str(args.steps), "--bucket-mb", str(args.bucket_mb)]
                done = subprocess.run(
                    [*command, *options],
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
                row = json.loads(lines[0])
                one = next(
                    (
                        r
                        for r in rows
                        if (r["model"], r["overlap"], r["ranks"]) == (model, overlap == "on", 1)
                    ),
                    None,
                )
                row["efficiency"] = (
                    round(row["samples_per_s"] / (n * one["samples_per_s"]), 3) if one else None
                )
                print(json.dumps(row), flush=True)
                rows.append(row)
    print()
    print(
        "| model | overlap | ranks | batch/rank | buckets | samples/s | efficiency | step ms |"
        " reduce wait ms | all-reduce alone ms |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {'on' if r['overlap'] else 'off'} | {r['ranks']} |"
            f" {r['batch_per_rank']} | {r['buckets']} | {r['samples_per_s']} |"
            f" {r['efficiency'] if r['efficiency'] is not None else '-'} | {r['step_ms']} |"
            f" {r['reduce_wait_ms']} | {r['allreduce_only_ms']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
