"""Batches on a backend's device: what ``DataLoader(..., device="gpu")`` yields.

A `TensorDataset` (batched by `get_batch`, no ``collate_fn``) whose arrays each fit on
the device is *resident*: its arrays are uploaded once, at the first epoch, and every
batch is taken on the device (``array[order[start:stop]]``), so an epoch uploads only
its order of rows (4 bytes a sample, and nothing when the order is the epoch before's,
as with ``shuffle=False``). Any other data set is *streamed*: batches are made on the
host as without a device and uploaded ``prefetch`` batches ahead of the one handed out,
so the uploads of the next batches are queued while the current step runs.

The batches are the backend's device arrays (``asgrad.gpu.GpuArray`` for ``"gpu"``),
which its programs take as feeds with no host round trip; ``np.asarray(batch[0])``
reads one back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from asgrad.nn.errors import DataError
from asgrad.tensor.runtime.backends import DataBackend, get_backend, resolve_backend_name

__all__ = ["ResidentArrays", "data_backend", "placed", "prefetched"]


def data_backend(device: str) -> DataBackend | None:
    """The backend that ``device`` names, or ``None`` for the host (``"cpu"``)."""
    name = resolve_backend_name(device)
    if name == "cpu":
        return None
    backend = get_backend(name)
    if not isinstance(backend, DataBackend):
        raise DataError(
            f"DataLoader(device={device!r}): the {name!r} backend cannot hold data on its"
            " device; leave device unset to get host (numpy) batches"
        )
    return backend


class ResidentArrays:
    """A data set's arrays on a device, and the epoch order last uploaded."""

    def __init__(self, backend: DataBackend, arrays: Sequence[np.ndarray]) -> None:
        self.backend = backend
        self.arrays = tuple(backend.to_device(np.ascontiguousarray(a)) for a in arrays)
        self._order_host: np.ndarray | None = None
        self._order: Any = None

    def batches(self, index_batches: Iterable[np.ndarray]) -> Iterator[tuple[Any, ...]]:
        """The batches of one epoch (its batches of row numbers), taken on the device."""
        sizes = []
        parts = []
        for indices in index_batches:
            sizes.append(len(indices))
            parts.append(indices)
        if not parts:
            return
        order = np.concatenate(parts).astype(np.int32)
        if self._order_host is None or not np.array_equal(order, self._order_host):
            self._order = self.backend.to_device(order)  # the epoch's one upload
            self._order_host = order
        start = 0
        for size in sizes:
            stop = start + size
            yield self.backend.take(self.arrays, self._order, start, stop)
            start = stop


def placed(backend: DataBackend, batch: Any) -> Any:
    """``batch`` (an array, or a tuple, list or dict of them) uploaded to the device."""
    if isinstance(batch, tuple | list):
        return tuple(placed(backend, b) for b in batch)
    if isinstance(batch, dict):
        return {k: placed(backend, v) for k, v in batch.items()}
    return backend.to_device(np.ascontiguousarray(batch))


def prefetched(backend: DataBackend, batches: Iterable[Any], depth: int) -> Iterator[Any]:
    """``batches`` uploaded ``depth`` batches ahead of the one yielded.

    The uploads are queued on the device at once and run before the steps launched
    after them; the host makes and uploads the next batches while the device still
    works on the steps before.
    """
    queue: deque[Any] = deque()
    for batch in batches:
        queue.append(placed(backend, batch))
        if len(queue) > depth:
            yield queue.popleft()
    while queue:
        yield queue.popleft()
