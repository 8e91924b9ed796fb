"""asgrad.nn.distributed's step on the GPU backend: same steps as the CPU, buckets cross once.

Needs ``asgrad.nn`` and ``asgrad.gpu``, hence here. One process (a DistributedStep
with accumulation takes the same path as one with several ranks, less the MPI call).
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device
from asgrad.nn import distributed as dist
from asgrad.tensor import Graph

pytestmark = pytest.mark.gpu


def _train(backend: str, steps: int = 6) -> tuple[list[float], list[np.ndarray], object]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(5, 8, rng=1), nn.Tanh(), nn.Linear(8, 3, rng=2))
    g = Graph()
    x, y = g.input("x", (4, 5)), g.input("y", (4,), "int64")
    opt = nn.AdamW(model.parameters(), lr=1e-2)
    step = dist.DistributedStep(opt, nn.cross_entropy(model(x), y), accumulate=2, backend=backend)
    losses = []
    for _ in range(steps):
        xs = rng.normal(size=(4, 5)).astype(np.float32)
        ys = rng.integers(0, 3, size=4).astype(np.int64)
        losses.append(float(step(x=xs, y=ys)[0]))
    return losses, [np.array(p.value) for p in model.parameters()], step


def test_the_gpu_step_matches_the_cpu_step(device: Device) -> None:
    del device
    gpu_losses, gpu_params, _ = _train("gpu")
    cpu_losses, cpu_params, _ = _train("cpu")
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-6)
    for a, b in zip(gpu_params, cpu_params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_each_bucket_crosses_once_per_micro_batch_and_update(device: Device) -> None:
    _, _, step = _train("gpu", steps=2)  # plans built
    assert isinstance(step, dist.DistributedStep)
    rng = np.random.default_rng(1)
    for _ in range(2):  # one more update, after _train's reads of the parameters
        step(x=rng.normal(size=(4, 5)).astype(np.float32), y=np.zeros(4, np.int64))
    before = device.counter.snapshot()
    for _ in range(2):  # one update: two micro-batches
        step(x=rng.normal(size=(4, 5)).astype(np.float32), y=np.zeros(4, np.int64))
    moved = device.counter - before
    buckets = len(step.sizes)
    assert moved.readbacks == 2  # loss and every bucket in one mapping, per micro-batch
    assert moved.uploads == 2 * 2 + buckets  # x and y per micro-batch; each bucket once
