"""Run under ``mpirun -n N``: SyncBatchNorm on N ranks is BatchNorm on the global batch.

Each rank holds a model whose batch norm ``SyncBatchNorm.convert_sync_batchnorm``
turned into a ``SyncBatchNorm``, and trains it with a ``DistributedStep`` on its shard
(rank ``r`` takes rows ``r*B`` to ``(r+1)*B`` of each global batch); every rank also
trains the single-process reference, the same model with ``BatchNorm1d``, on the
global batch. After every step it compares the rank's rows of the forward output,
the running statistics and, through SGD without momentum, the gradients (the
parameters' change over the learning rate); then the evaluation-mode output. Prints
``RESULT ... ok`` on rank 0.
"""

from __future__ import annotations

import sys

import numpy as np

from asgrad import nn
from asgrad.nn import distributed as dist
from asgrad.tensor import Graph, evaluate

B, IN, C, OUT, LR = 4, 5, 6, 3, 0.1


def build() -> nn.Sequential:
    rng = np.random.default_rng(0)
    return nn.Sequential(
        nn.Linear(IN, C, rng=rng), nn.BatchNorm1d(C), nn.Tanh(), nn.Linear(C, OUT, rng=rng)
    )


def main() -> int:
    dist.init(timeout=120)
    n, r = dist.world_size(), dist.rank()
    model = build()
    assert nn.SyncBatchNorm.convert_sync_batchnorm(model) is model
    assert isinstance(model[1], nn.SyncBatchNorm)
    g = Graph("sync")
    x, y = g.input("x", (B, IN)), g.input("y", (B,), "int64")
    out = model(x)
    opt = nn.SGD(model.parameters(), lr=LR)
    step = dist.DistributedStep(opt, nn.cross_entropy(out, y), [out])
    assert step.phases is not None
    ref = build()
    rg = Graph("ref")
    rx, ry = rg.input("x", (n * B, IN)), rg.input("y", (n * B,), "int64")
    rout = ref(rx)
    ref_step = nn.SGD(ref.parameters(), lr=LR).compile(nn.cross_entropy(rout, ry), [rout])
    rng = np.random.default_rng(1)
    worst = {"output": 0.0, "running": 0.0, "gradient": 0.0, "eval": 0.0}
    for _ in range(4):
        xs = (3.0 * rng.normal(size=(n * B, IN)) + 1.0).astype(np.float32)
        ys = rng.integers(0, OUT, size=n * B).astype(np.int64)
        before = [np.array(p.value) for p in model.parameters()]
        ref_before = [np.array(p.value) for p in ref.parameters()]
        _, mine = step(x=xs[r * B : (r + 1) * B], y=ys[r * B : (r + 1) * B])
        _, theirs = ref_step(x=xs, y=ys)
        rows = theirs[r * B : (r + 1) * B]
        worst["output"] = max(worst["output"], float(np.abs(mine - rows).max()))
        for name in ("running_mean", "running_var"):
            a, b = getattr(model[1], name).value, getattr(ref[1], name).value
            worst["running"] = max(worst["running"], float(np.abs(a - b).max()))
        pairs = zip(model.parameters(), before, ref.parameters(), ref_before, strict=True)
        for p, p0, q, q0 in pairs:
            grad_mine, grad_ref = (p0 - p.value) / LR, (q0 - q.value) / LR
            worst["gradient"] = max(worst["gradient"], float(np.abs(grad_mine - grad_ref).max()))
    model.eval()
    ref.eval()
    xs = rng.normal(size=(B, IN)).astype(np.float32)
    ex = Graph("eval").input("x", (B, IN))
    (synced,), (single,) = evaluate(model(ex), {"x": xs}), evaluate(ref(ex), {"x": xs})
    worst["eval"] = float(np.abs(synced - single).max())
    worst = {k: float(dist.all_reduce(v, "max")) for k, v in worst.items()}
    ok = all(v < 2e-5 for v in worst.values())
    if r == 0:
        details = " ".join(f"{k}={v:.3g}" for k, v in worst.items())
        print(f"RESULT ranks={n} syncbn {details} {'ok' if ok else 'FAILED'}", flush=True)
    dist.barrier()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
