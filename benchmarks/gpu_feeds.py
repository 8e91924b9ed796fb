"""How a GPU training step is fed: host batches, device arrays, the device data loader.

    python benchmarks/gpu_feeds.py [--samples 60000] [--batch 64] [--steps 300] [--runs 3]

One MLP step (784-128-64-10, Adam, the ``mlp`` workload's model) is launched ``steps``
times, waiting once at the end, fed in each of these ways:

- ``numpy-same``: the same numpy arrays every step (uploaded every step);
- ``device-same``: the same ``GpuArray``s every step (``to_gpu`` once: nothing moves);
- ``host-loader``: ``DataLoader(...)``'s numpy batches (made and uploaded every step);
- ``resident``: ``DataLoader(..., device="gpu")`` over a ``TensorDataset``: the data set
  on the device, each batch taken there;
- ``streamed-0`` / ``streamed-2``: the same data set streamed (made on the host and
  uploaded 0 or 2 batches ahead);
- ``streamed-thread``: a background thread makes the host batches (queue of 4) while the
  main thread uploads them and launches the steps: the variant the loader does not use,
  measured to see whether a thread would pay.

Prints one JSON line per way: steps/s (the fastest of ``runs``), and the uploads and
device copies per step from the device's ``TransferCounter``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.gpu import get_device, to_gpu
from asgrad.nn.data import DataLoader, MapDataset, TensorDataset
from asgrad.tensor import Graph


def _step(batch: int) -> Any:
    model = nn.Sequential(
        nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
    )
    model.initialize(0)
    g = Graph("mlp")
    x, y = g.input("x", (batch, 784)), g.input("y", (batch,), "int64")
    return nn.Adam(model.parameters(), lr=1e-3).compile(
        nn.cross_entropy(model(x), y), backend="gpu"
    )


def _threaded(loader: DataLoader) -> Iterator[tuple[Any, ...]]:
    """Host batches made by a background thread, uploaded here (the device is not
    thread-safe)."""
    batches: queue.Queue[Any] = queue.Queue(maxsize=4)

    def make() -> None:
        for batch in loader:
            batches.put(batch)
        batches.put(None)

    thread = threading.Thread(target=make, daemon=True)
    thread.start()
    while (batch := batches.get()) is not None:
        yield tuple(to_gpu(a) for a in batch)
    thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.samples, 784)).astype(np.float32)
    y = rng.integers(0, 10, args.samples).astype(np.int64)
    data = TensorDataset(x, y)
    streamed = MapDataset(data, lambda *sample: sample, batched=True)  # not resident
    options: dict[str, Any] = {"batch_size": args.batch, "shuffle": True, "seed": 0}
    options["drop_last"] = True
    same = {"x": x[: args.batch], "y": y[: args.batch]}
    same_on_device = {name: to_gpu(v) for name, v in same.items()}

    def batches(epoch: Callable[[], Iterable[Any]]) -> Callable[[], Iterator[dict[str, Any]]]:
        def endless() -> Iterator[dict[str, Any]]:
            while True:  # one loader, epoch after epoch
                for xb, yb in epoch():
                    yield {"x": xb, "y": yb}

        return endless

    host = DataLoader(data, **options)
    resident = DataLoader(data, **options, device="gpu")
    ahead_0 = DataLoader(streamed, **options, device="gpu", prefetch=0)
    ahead_2 = DataLoader(streamed, **options, device="gpu", prefetch=2)
    ways: dict[str, Callable[[], Iterator[dict[str, Any]]]] = {
        "numpy-same": lambda: itertools.repeat(same),
        "device-same": lambda: itertools.repeat(same_on_device),
        "host-loader": batches(lambda: host),
        "resident": batches(lambda: resident),
        "streamed-0": batches(lambda: ahead_0),
        "streamed-2": batches(lambda: ahead_2),
        "streamed-thread": batches(lambda: _threaded(host)),
    }
    device = get_device()
    for name, make in ways.items():
        step = _step(args.batch)
        feeds = make()
        step.launch(next(feeds))[0].numpy()  # builds the plan, places a resident data set
        best = float("inf")
        for _ in range(args.runs):
            before = device.counter.snapshot()
            start = time.perf_counter()
            for _ in range(args.steps):
                loss = step.launch(next(feeds))[0]
            loss.numpy()
            best = min(best, time.perf_counter() - start)
            moved = device.counter.snapshot() - before
        row = {
            "way": name,
            "steps_per_s": round(args.steps / best, 1),
            "uploads_per_step": round(moved.uploads / args.steps, 2),
            "upload_bytes_per_step": round(moved.upload_bytes / args.steps),
            "device_copies_per_step": round(moved.device_copies / args.steps, 2),
            "adapter": device.capabilities.adapter,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
