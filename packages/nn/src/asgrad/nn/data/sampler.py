"""Samplers: which dataset indices an epoch visits, and in what order.

Random samplers are reproducible per epoch: epoch ``e`` of a sampler seeded with ``s``
draws from ``numpy.random.default_rng([s, e])``, so every epoch gets a fresh order,
two runs with the same seed see the same orders, and a resumed run can jump straight to
epoch ``e`` with ``set_epoch(e)``. Iterating advances the epoch counter by one.

Example:
    >>> s = RandomSampler(5, seed=0)
    >>> first, second = list(s), list(s)
    >>> sorted(first) == list(range(5)) and first != second
    True
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sized

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import DataError

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "WeightedRandomSampler",
]


def _length(data_source: Sized | int) -> int:
    n = data_source if isinstance(data_source, int) else len(data_source)
    if n < 0:
        raise DataError(f"sampler: dataset length must be non-negative, got {n}")
    return n


def _base_seed(seed: int | None) -> int:
    # Without a seed, draw one from OS entropy once, so epochs still differ.
    if seed is None:
        return int(np.random.default_rng().integers(0, 2**63))
    if seed < 0:
        raise DataError(f"sampler: seed must be non-negative, got {seed}")
    return seed


class Sampler(ABC):
    """Base class: yields dataset indices for one epoch per iteration."""

    epoch: int = 0

    @abstractmethod
    def indices(self) -> NDArray[np.intp]:
        """The indices of the current epoch as one array (the epoch stays the same)."""

    @abstractmethod
    def __len__(self) -> int: ...

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce the order of ``epoch`` (for resuming)."""
        if epoch < 0:
            raise DataError(f"set_epoch: epoch must be non-negative, got {epoch}")
        self.epoch = epoch

    def next_epoch(self) -> NDArray[np.intp]:
        """Return this epoch's indices and advance to the next epoch."""
        out = self.indices()
        self.epoch += 1
        return out

    def __iter__(self) -> Iterator[int]:
        return iter(self.next_epoch().tolist())


class SequentialSampler(Sampler):
    """Indices ``0, 1, ..., n - 1`` in order, every epoch.

    Example:
        >>> list(SequentialSampler(3))
        [0, 1, 2]
    """

    def __init__(self, data_source: Sized | int) -> None:
        self.num_samples = _length(data_source)

    def indices(self) -> NDArray[np.intp]:
        return np.arange(self.num_samples, dtype=np.intp)

    def __len__(self) -> int:
        return self.num_samples


class RandomSampler(Sampler):
    """A random permutation per epoch, or ``num_samples`` draws with replacement.

    Example:
        >>> sorted(RandomSampler(4, seed=1))
        [0, 1, 2, 3]
        >>> len(list(RandomSampler(4, seed=1, replacement=True, num_samples=10)))
        10
    """

    def __init__(
        self,
        data_source: Sized | int,
        seed: int | None = None,
        replacement: bool = False,
        num_samples: int | None = None,
    ) -> None:
        self.n = _length(data_source)
        self.seed = _base_seed(seed)
        self.replacement = replacement
        self.num_samples = self.n if num_samples is None else num_samples
        if self.num_samples < 0:
            raise DataError(f"RandomSampler: num_samples must be >= 0, got {num_samples}")
        if not replacement and self.num_samples > self.n:
            raise DataError(
                f"RandomSampler: num_samples={self.num_samples} exceeds the dataset "
                f"length {self.n} without replacement; pass replacement=True"
            )
        if replacement and self.n == 0 and self.num_samples > 0:
            raise DataError("RandomSampler: cannot draw from an empty dataset")

    def indices(self) -> NDArray[np.intp]:
        rng = np.random.default_rng([self.seed, self.epoch])
        if self.replacement:
            return rng.integers(0, self.n, size=self.num_samples).astype(np.intp)
        return rng.permutation(self.n)[: self.num_samples].astype(np.intp)

    def __len__(self) -> int:
        return self.num_samples


class WeightedRandomSampler(Sampler):
    """Draw ``num_samples`` indices with probability proportional to ``weights``.

    Typical use: oversampling rare classes with ``weights = 1 / class_count[y]``.

    Example:
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], num_samples=4, seed=0)
        >>> list(s)
        [1, 1, 1, 1]
    """

    def __init__(
        self,
        weights: ArrayLike,
        num_samples: int,
        replacement: bool = True,
        seed: int | None = None,
    ) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or w.size == 0:
            raise DataError(
                f"WeightedRandomSampler: weights must be a non-empty 1-D array, got shape {w.shape}"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise DataError(
                "WeightedRandomSampler: weights must be finite, non-negative and not all zero"
            )
        if num_samples < 0:
            raise DataError(f"WeightedRandomSampler: num_samples must be >= 0, got {num_samples}")
        if not replacement and num_samples > int(np.count_nonzero(w)):
            raise DataError(
                f"WeightedRandomSampler: cannot draw {num_samples} distinct indices: "
                f"only {np.count_nonzero(w)} have non-zero weight; "
                "pass replacement=True"
            )
        self.probabilities: NDArray[np.float64] = w / w.sum()
        self.num_samples = num_samples
        self.replacement = replacement
        self.seed = _base_seed(seed)

    def indices(self) -> NDArray[np.intp]:
        rng = np.random.default_rng([self.seed, self.epoch])
        drawn = rng.choice(
            self.probabilities.size,
            size=self.num_samples,
            replace=self.replacement,
            p=self.probabilities,
        )
        return np.asarray(drawn, dtype=np.intp)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler:
    """Group another sampler's indices into batches (1-D ``intp`` arrays).

    Example:
        >>> [b.tolist() for b in BatchSampler(SequentialSampler(5), 2, drop_last=False)]
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler: Sampler, batch_size: int, drop_last: bool = False) -> None:
        if isinstance(batch_size, bool) or batch_size < 1:
            raise DataError(f"BatchSampler: batch_size must be a positive int, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def set_epoch(self, epoch: int) -> None:
        """Forward to the wrapped sampler (see `Sampler.set_epoch`)."""
        self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[NDArray[np.intp]]:
        order = self.sampler.next_epoch()
        stop = len(self) * self.batch_size if self.drop_last else order.size
        for start in range(0, stop, self.batch_size):
            yield order[start : start + self.batch_size]

    def __len__(self) -> int:
        n = len(self.sampler)
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size
