"""``DataLoader``: iterate over a dataset in batches of stacked numpy arrays.

Example:
    >>> import numpy as np
    >>> from asgrad.nn.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(np.arange(10.0).reshape(5, 2), np.arange(5))
    >>> loader = DataLoader(ds, batch_size=2, shuffle=True, seed=0)
    >>> len(loader), [xb.shape for xb, yb in loader]
    (3, [(2, 2), (2, 2), (1, 2)])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from asgrad.nn.data.dataset import Dataset, Sample, TensorDataset
from asgrad.nn.data.device import ResidentArrays, data_backend, prefetched
from asgrad.nn.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)
from asgrad.nn.errors import DataError
from asgrad.tensor.runtime.backends import DataBackend

__all__ = ["CollateFn", "DataLoader"]

CollateFn = Callable[[Sequence[Sample]], Sample]
"""Turns a list of samples into one batch, like `default_collate`."""


class DataLoader:
    """Batches of a dataset, one epoch per iteration.

    Args:
        dataset: any `Dataset`.
        batch_size: samples per batch (the last one may be smaller, see ``drop_last``).
        shuffle: draw a fresh permutation every epoch (reproducible from ``seed``).
        drop_last: drop the final incomplete batch; ``len(loader)`` accounts for it.
        seed: seed of the shuffling sampler; ``None`` means fresh OS entropy.
        sampler: a custom `Sampler` (excludes ``shuffle``).
        collate_fn: builds a batch from a list of items. Without it the loader asks the
            dataset for the whole batch at once (``dataset.get_batch``), which for a
            `TensorDataset` is a single fancy-indexing operation.
        device: the backend whose device the batches are placed on (``"gpu"``, as
            PyTorch's ``.to("cuda")``); ``None`` or ``"cpu"``: numpy batches. A
            `TensorDataset` whose arrays fit on the device is uploaded once and each
            batch is taken on the device, so an epoch uploads no data; other data sets
            are batched on the host and uploaded ahead (see ``prefetch``). The batches
            are the backend's device arrays, which its programs take as feeds as they
            are (`asgrad.nn.data.device`). The same batches in the same order as on the
            host, shuffled by the same seed, and of the same dtypes: a device feed is
            never converted, so give a float32 input float32 arrays.
        prefetch: with a ``device``, how many batches a streamed data set uploads ahead
            of the one handed out (0: each when it is handed out).

    Each ``for`` loop over the loader is one epoch; ``set_epoch(e)`` makes the next loop
    replay epoch ``e``'s order, for resuming from a checkpoint.
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        sampler: Sampler | None = None,
        collate_fn: CollateFn | None = None,
        *,
        device: str | None = None,
        prefetch: int = 2,
    ) -> None:
        if prefetch < 0:
            raise DataError(f"DataLoader: prefetch must be 0 or more, got {prefetch}")
        if sampler is not None and shuffle:
            raise DataError(
                "DataLoader: pass either shuffle=True or a sampler, not both; a "
                "RandomSampler(dataset, seed=...) shuffles"
            )
        if sampler is None:
            sampler = RandomSampler(dataset, seed=seed) if shuffle else SequentialSampler(dataset)
        self.dataset = dataset
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        self.device = device
        self.prefetch = prefetch
        self._backend = data_backend(device) if device is not None else None
        self._resident: ResidentArrays | None = None

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will produce."""
        return self.sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce the batches of ``epoch``."""
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[Sample]:
        backend = self._backend
        if backend is None:
            return self._host_batches()
        if self._resident is None:
            arrays = self._resident_arrays(backend)
            if arrays is not None:
                self._resident = ResidentArrays(backend, arrays)
        if self._resident is not None:
            return self._resident.batches(self.batch_sampler)
        return prefetched(backend, self._host_batches(), self.prefetch)

    def _host_batches(self) -> Iterator[Sample]:
        for batch_indices in self.batch_sampler:
            if self.collate_fn is None:
                yield self.dataset.get_batch(batch_indices)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in batch_indices])

    def _resident_arrays(self, backend: DataBackend) -> tuple[Any, ...] | None:
        """The arrays to keep on the device: a `TensorDataset`'s, batched by its own
        ``get_batch``, each fitting; else ``None`` (the batches are streamed)."""
        dataset = self.dataset
        if (
            isinstance(dataset, TensorDataset)
            and type(dataset).get_batch is TensorDataset.get_batch
            and self.collate_fn is None
            and all(backend.holds(a.nbytes) for a in dataset.arrays)
        ):
            return dataset.arrays
        return None

    def __len__(self) -> int:
        return len(self.batch_sampler)
