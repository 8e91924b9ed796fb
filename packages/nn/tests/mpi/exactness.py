"""Run under ``mpirun -n N``: N ranks with batch B step like one process with batch N*B.

Every rank also computes the single-process reference itself (a second copy of the
model, trained with ``optimizer.compile`` on the whole global batch), then compares:
parameters after every update, for SGD and AdamW, with and without accumulation, over
two epochs (the sampler reshuffles). The step overlaps the reduction with the backward
pass (three buckets, three stages); a twin step without overlap, on a copy of the
model, must end every update with bit-identical parameters. Prints one ``RESULT``
line per case on rank 0.
The backend is the default one (``ASGRAD_DEVICE=gpu`` runs both on the GPU).
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

from asgrad import nn
from asgrad.nn import distributed as dist
from asgrad.nn.data import DataLoader, TensorDataset
from asgrad.tensor import Graph

B = 4  # micro-batch per rank
IN, HIDDEN, OUT = 6, 16, 3


def build(seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    return nn.Sequential(nn.Linear(IN, HIDDEN, rng=rng), nn.Tanh(), nn.Linear(HIDDEN, OUT, rng=rng))


def make_optimizer(kind: str, model: nn.Module) -> nn.Optimizer:
    if kind == "sgd":
        return nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return nn.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)


def params(model: nn.Module) -> list[np.ndarray]:
    return [np.array(p.value) for p in model.parameters()]


def run_case(kind: str, accumulate: int, x: np.ndarray, y: np.ndarray) -> float:
    n = dist.world_size()
    # The distributed run: a model whose rank-0 values are broadcast (ranks start from
    # different seeds, so the broadcast is what makes them agree).
    model = build(seed=100 + dist.rank())
    dist.broadcast_variables(model.parameters())
    opt = make_optimizer(kind, model)
    g = Graph("dp")
    xb, yb = g.input("x", (B, IN)), g.input("y", (B,), "int64")
    # DistributedStep itself (compile_step would give the plain program for one rank
    # without accumulation): every case goes through the buckets and the reduction.
    step = dist.DistributedStep(
        opt, nn.cross_entropy(model(xb), yb), accumulate=accumulate, bucket_bytes=256, overlap=True
    )
    assert step.overlap, step
    assert len(step.sizes) == 3, step
    twin = build(seed=100)
    dist.broadcast_variables(twin.parameters())
    tg = Graph("twin")
    tx, ty = tg.input("x", (B, IN)), tg.input("y", (B,), "int64")
    twin_step = dist.DistributedStep(
        make_optimizer(kind, twin),
        nn.cross_entropy(twin(tx), ty),
        accumulate=accumulate,
        bucket_bytes=256,
        overlap=False,
    )
    sampler = dist.DistributedSampler(len(y), shuffle=True, seed=7)
    loader = DataLoader(TensorDataset(x, y), B, sampler=sampler)

    # The reference: one process, batch N * accumulate * B, same order.
    ref = build(seed=100)
    ref_opt = make_optimizer(kind, ref)
    rg = Graph("ref")
    big = n * accumulate * B
    rx, ry = rg.input("x", (big, IN)), rg.input("y", (big,), "int64")
    ref_step = ref_opt.compile(nn.cross_entropy(ref(rx), ry))
    ref_sampler = dist.DistributedSampler(len(y), num_replicas=1, rank=0, shuffle=True, seed=7)
    ref_loader = DataLoader(TensorDataset(x, y), big, sampler=ref_sampler)

    worst = 0.0
    identical = True
    updates = 0
    for _epoch in range(2):
        ref_batches = iter(ref_loader)
        for xs, ys in loader:
            step(x=xs, y=ys)
            twin_step(x=xs, y=ys)
            if step.updated:
                for a, b in zip(params(model), params(twin), strict=True):
                    identical &= bool(np.array_equal(a, b))
                rxs, rys = next(ref_batches)
                ref_step(x=rxs, y=rys)
                updates += 1
                for a, b in zip(params(model), params(ref), strict=True):
                    scale = max(1.0, float(np.abs(b).max()))
                    worst = max(worst, float(np.abs(a - b).max()) / scale)
    assert updates == 2 * len(y) // (n * accumulate * B), updates
    # every rank ends with the same parameters
    digest = hashlib.sha256(b"".join(p.tobytes() for p in params(model))).hexdigest()
    digests = dist.all_gather_object(digest)
    assert len(set(digests)) == 1, f"ranks diverged: {digests}"
    assert identical, "the overlapped step's parameters differ from the twin's without overlap"
    return float(dist.all_reduce(worst, "max"))


def check_shards(n_samples: int) -> None:
    sampler = dist.DistributedSampler(n_samples, shuffle=True, seed=3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        shards = dist.all_gather_object(sampler.indices().tolist())
        flat = sorted(i for s in shards for i in s)
        assert flat == list(range(n_samples)), f"epoch {epoch}: shards do not tile the data"
        if epoch == 0:
            first = shards
    assert shards != first, "the sampler did not reshuffle between epochs"


def main() -> int:
    dist.init(timeout=120)
    n = dist.world_size()
    rng = np.random.default_rng(0)
    samples = 2 * 2 * 4 * B * 3  # divisible by N * accumulate * B for N in 1, 2, 4
    x = rng.normal(size=(samples, IN)).astype(np.float32)
    y = rng.integers(0, OUT, size=samples).astype(np.int64)
    check_shards(samples)
    failed = False
    # ``exactness.py adamw:2 ...`` runs the cases named; the default is all four
    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in sys.argv[1:]] or [
        (kind, accumulate) for kind in ("sgd", "adamw") for accumulate in (1, 2)
    ]
    for kind, accumulate in cases:
        worst = run_case(kind, accumulate, x, y)
        ok = worst < 2e-5
        failed |= not ok
        if dist.rank() == 0:
            print(
                f"RESULT ranks={n} {kind} accumulate={accumulate} max_rel_diff={worst:.3g}"
                f" {'ok' if ok else 'FAILED'}",
                flush=True,
            )
    dist.barrier()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
