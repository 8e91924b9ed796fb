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

from asgrad.nn.data.dataset import Dataset, Sample
from asgrad.nn.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)
from asgrad.nn.errors import DataError

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
    ) -> None:
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

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will produce."""
        return self.sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce the batches of ``epoch``."""
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[Sample]:
        for batch_indices in self.batch_sampler:
            if self.collate_fn is None:
                yield self.dataset.get_batch(batch_indices)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in batch_indices])

    def __len__(self) -> int:
        return len(self.batch_sampler)
