"""Run under ``mpirun -n N``: train 3 epochs with a checkpoint after each, resuming if one exists.

``python resume.py CKPT_DIR OUT.npz [CRASH_EPOCH]``: with CRASH_EPOCH, rank 1 raises
in the middle of that epoch (after its checkpoint of the epoch before was written).
Rank 0 writes the final parameters to OUT.npz.
"""

from __future__ import annotations

import sys

import numpy as np

from asgrad import nn
from asgrad.nn import distributed as dist
from asgrad.nn.data import DataLoader, TensorDataset
from asgrad.nn.errors import CheckpointNotFoundError
from asgrad.nn.serialization import CheckpointManager
from asgrad.tensor import Graph

EPOCHS, B = 3, 4


def main(directory: str, out: str, crash_epoch: int | None) -> None:
    dist.init(timeout=60)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=64).astype(np.int64)
    model = nn.Sequential(nn.Linear(5, 8, rng=1), nn.ReLU(), nn.Linear(8, 3, rng=2))
    dist.broadcast_variables(model.parameters())
    opt = nn.AdamW(model.parameters(), lr=1e-2)
    g = Graph()
    xb, yb = g.input("x", (B, 5)), g.input("y", (B,), "int64")
    step = dist.compile_step(opt, nn.cross_entropy(model(xb), yb), accumulate=2)
    sampler = dist.DistributedSampler(len(y), seed=5)
    loader = DataLoader(TensorDataset(x, y), B, sampler=sampler)
    manager = CheckpointManager(directory, keep_last=2)
    start = 0
    try:
        data = dist.load(manager, expected=model.state_dict())
    except CheckpointNotFoundError:
        pass
    else:
        model.load_state_dict(data.model_state)
        assert data.optimizer_state is not None
        assert data.epoch is not None
        opt.load_state_dict(data.optimizer_state)
        start = data.epoch + 1
        if dist.rank() == 0:
            print(f"resumed after epoch {data.epoch}", flush=True)
    for epoch in range(start, EPOCHS):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for i, (xs, ys) in enumerate(loader):
            if epoch == crash_epoch and i == 3 and dist.rank() == 1:
                raise RuntimeError("injected crash")
            total += float(step(x=xs, y=ys)[0]) * len(ys)
            count += len(ys)
        loss = dist.all_reduce(np.array([total, count]), "sum")
        dist.save(
            manager,
            int(opt.step_count.value),
            model.state_dict(),
            opt.state_dict(),
            epoch=epoch,
            metrics={"loss": loss[0] / loss[1]},
        )
    if dist.rank() == 0:
        np.savez(out, *[p.value for p in model.parameters()])
    manager.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
