"""``DataLoader(..., device="gpu")``: the host loader's batches, on the device.

A resident data set (a ``TensorDataset`` that fits) is uploaded once and sliced on the
device; any other is batched on the host and uploaded ahead. Either way the batches are
the host loader's, in its order (its seeded permutation), and training on them gives
the host loader's parameters bit for bit. Needs ``asgrad.nn`` and ``asgrad.gpu``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device, GpuArray
from asgrad.nn.data import DataLoader, MapDataset, TensorDataset
from asgrad.tensor import Graph

pytestmark = pytest.mark.gpu


def _dataset(n: int = 11) -> TensorDataset:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 2, 3)).astype(np.float32)
    return TensorDataset(x, rng.integers(0, 5, n).astype(np.int64), x[:, 0, 0] > 0)


def _host(batch: Any) -> tuple[np.ndarray, ...]:
    assert all(isinstance(a, GpuArray) for a in batch)
    return tuple(a.numpy() for a in batch)


def _assert_same_batches(host: DataLoader, device: DataLoader) -> None:
    want = [tuple(b) for b in host]
    got = [_host(b) for b in device]
    assert len(got) == len(want) == len(host)
    for want_batch, got_batch in zip(want, got, strict=True):
        for w, g in zip(want_batch, got_batch, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("drop_last", [False, True])
def test_a_resident_loader_yields_the_host_loaders_batches_in_its_order(
    device: Device, drop_last: bool
) -> None:
    options: dict[str, Any] = {"batch_size": 4, "shuffle": True, "seed": 3, "drop_last": drop_last}
    host, on_device = (
        DataLoader(_dataset(), **options),
        DataLoader(_dataset(), **options, device="gpu"),
    )
    for _ in range(3):  # a fresh permutation every epoch, the same on both
        _assert_same_batches(host, on_device)


def test_a_resident_epoch_uploads_only_its_order(device: Device) -> None:
    n = 11
    shuffled = DataLoader(_dataset(n), batch_size=4, shuffle=True, seed=0, device="gpu")
    in_order = DataLoader(_dataset(n), batch_size=4, device="gpu")
    for loader in (shuffled, in_order):
        list(loader)  # the first epoch places the data set
    before = device.counter.snapshot()
    list(shuffled)
    moved = device.counter.snapshot() - before
    assert (moved.uploads, moved.upload_bytes) == (1, 4 * n)  # the permutation, as int32
    before = device.counter.snapshot()
    list(in_order)
    assert (device.counter.snapshot() - before).uploads == 0  # the same order as before


def test_a_streamed_loader_yields_the_host_loaders_batches_in_its_order(
    device: Device,
) -> None:
    def scaled(x: np.ndarray, y: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, ...]:
        return x * np.float32(2.0), y, m

    options: dict[str, Any] = {"batch_size": 3, "shuffle": True, "seed": 1}
    mapped = MapDataset(_dataset(), scaled)  # not resident: batched item by item
    host = DataLoader(mapped, **options)
    for prefetch in (0, 2):
        on_device = DataLoader(mapped, **options, device="gpu", prefetch=prefetch)
        host.set_epoch(0)
        on_device.set_epoch(0)
        _assert_same_batches(host, on_device)


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_a_streamed_loader_uploads_prefetch_batches_ahead(device: Device, prefetch: int) -> None:
    fields = 3
    loader = DataLoader(
        _dataset(12), batch_size=2, collate_fn=_stack, device="gpu", prefetch=prefetch
    )
    batches = iter(loader)
    before = device.counter.snapshot()
    next(batches)
    assert (device.counter.snapshot() - before).uploads == fields * (1 + prefetch)
    next(batches)
    assert (device.counter.snapshot() - before).uploads == fields * (2 + prefetch)


def _stack(items: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    return tuple(np.stack(field) for field in zip(*items, strict=True))


def test_training_on_device_batches_gives_the_host_batches_parameters(device: Device) -> None:
    def train(device_name: str | None) -> list[np.ndarray]:
        model = nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
        model.initialize(0)
        g = Graph()
        x, y = g.input("x", (4, 2, 3)), g.input("y", (4,), "int64")
        step = nn.Adam(model.parameters(), lr=1e-2).compile(
            nn.cross_entropy(model(x), y), backend="gpu"
        )
        loader = DataLoader(_dataset(16), batch_size=4, shuffle=True, seed=2, device=device_name)
        for _ in range(2):
            for xb, yb, _mask in loader:
                step(x=xb, y=yb)
        return [p.value for p in model.parameters()]

    for want, got in zip(train(None), train("gpu"), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_cpu_device_gives_numpy_batches() -> None:
    (batch,) = list(DataLoader(_dataset(4), batch_size=4, device="cpu"))
    assert all(isinstance(a, np.ndarray) for a in batch)
