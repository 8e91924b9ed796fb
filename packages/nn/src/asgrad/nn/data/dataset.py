"""Datasets: indexable collections of samples, each sample a tuple of numpy arrays.

A ``Dataset`` has ``__len__`` and ``__getitem__(i) -> tuple[np.ndarray, ...]``.
Datasets also answer ``get_batch(indices)``, which returns the stacked batch directly;
the default collects items one by one, and `TensorDataset` overrides it with one
fancy-indexing operation per array, which is what makes ``DataLoader`` fast.

Splitting a dataset (``random_split``) or arrays (``train_test_split``) lives in
`asgrad.nn.data.split`.

Example:
    >>> import numpy as np
    >>> from asgrad.nn.data import TensorDataset
    >>> ds = TensorDataset(np.arange(6.0).reshape(3, 2), np.array([0, 1, 0]))
    >>> len(ds), ds[1][0].tolist(), int(ds[1][1])
    (3, [2.0, 3.0], 1)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import DataError
from asgrad.tensor.errors import ArgumentTypeError, OutOfRangeError

__all__ = [
    "ConcatDataset",
    "Dataset",
    "MapDataset",
    "Sample",
    "Subset",
    "TensorDataset",
    "default_collate",
]

Sample = tuple[NDArray[Any], ...]
"""One item of a dataset (or one batch): a tuple of numpy arrays, e.g. ``(x, y)``."""


def default_collate(samples: Sequence[Sample]) -> Sample:
    """Stack a list of samples field by field into one batch.

    Example:
        >>> import numpy as np
        >>> items = [(np.zeros(2), np.array(1)), (np.ones(2), np.array(0))]
        >>> xb, yb = default_collate(items)
        >>> xb.shape, yb.tolist()
        ((2, 2), [1, 0])
    """
    if not samples:
        raise DataError("default_collate: cannot collate an empty list of samples")
    arity = len(samples[0])
    for k, sample in enumerate(samples):
        if len(sample) != arity:
            raise DataError(
                f"default_collate: sample 0 has {arity} fields but sample {k} has "
                f"{len(sample)}; every item of a dataset must have the same structure"
            )
    batch = []
    for field in range(arity):
        parts = [np.asarray(sample[field]) for sample in samples]
        shapes = {p.shape for p in parts}
        if len(shapes) > 1:
            raise DataError(
                f"default_collate: field {field} has different shapes across the batch "
                f"({sorted(shapes)}); pad or resize the items, or pass a collate_fn"
            )
        batch.append(np.stack(parts))
    return tuple(batch)


def _check_index(index: int, length: int, what: str) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise ArgumentTypeError(f"{what} indices must be integers, got {type(index).__name__}")
    i = int(index)
    if i < -length or i >= length:
        raise OutOfRangeError(f"{what} index {i} is out of range for length {length}")
    return i + length if i < 0 else i


def _as_index_array(indices: ArrayLike, length: int, what: str) -> NDArray[np.intp]:
    idx = np.asarray(indices)
    if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
        raise DataError(f"{what}: batch indices must be a 1-D integer array, got {idx!r}")
    idx = idx.astype(np.intp, copy=False)
    if idx.size and (idx.min() < -length or idx.max() >= length):
        raise OutOfRangeError(f"{what}: batch indices out of range for length {length}")
    return np.where(idx < 0, idx + length, idx)


class Dataset(ABC):
    """Abstract base class: a sized, indexable collection of samples.

    Subclasses implement ``__len__`` and ``__getitem__``; they may override
    ``get_batch`` with a vectorised version. ``a + b`` concatenates two datasets.
    """

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __getitem__(self, index: int) -> Sample: ...

    def get_batch(self, indices: ArrayLike) -> Sample:
        """Return the samples at ``indices`` stacked into one batch (item by item)."""
        idx = _as_index_array(indices, len(self), type(self).__name__)
        return default_collate([self[int(i)] for i in idx])

    def __iter__(self) -> Iterator[Sample]:
        for i in range(len(self)):
            yield self[i]

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """The in-memory dataset: equal-length numpy arrays indexed along their first axis.

    Batches are taken with one fancy-indexing operation per array.

    Example:
        >>> import numpy as np
        >>> ds = TensorDataset(np.zeros((4, 3)), np.arange(4))
        >>> [a.shape for a in ds.get_batch([3, 0])]
        [(2, 3), (2,)]
    """

    def __init__(self, *arrays: ArrayLike) -> None:
        if not arrays:
            raise DataError("TensorDataset needs at least one array")
        self.arrays: tuple[NDArray[Any], ...] = tuple(np.asarray(a) for a in arrays)
        for k, a in enumerate(self.arrays):
            if a.ndim == 0:
                raise DataError(f"TensorDataset: array {k} is a scalar; need a leading axis")
        lengths = [a.shape[0] for a in self.arrays]
        if len(set(lengths)) != 1:
            raise DataError(
                f"TensorDataset: arrays differ in length along axis 0 ({lengths}); "
                "every array must hold one row per sample"
            )

    def __len__(self) -> int:
        return int(self.arrays[0].shape[0])

    def __getitem__(self, index: int) -> Sample:
        i = _check_index(index, len(self), "TensorDataset")
        # `a[i, ...]` keeps 0-d arrays (not numpy scalars) for 1-D columns.
        return tuple(a[i, ...] for a in self.arrays)

    def get_batch(self, indices: ArrayLike) -> Sample:
        idx = _as_index_array(indices, len(self), "TensorDataset")
        return tuple(a[idx] for a in self.arrays)


class MapDataset(Dataset):
    """Apply a function to every sample of another dataset, lazily.

    With ``columns=None`` the function receives the whole sample as positional arguments
    and returns a tuple (or one array). With ``columns=(0,)`` it receives one array at a
    time and is applied to the listed fields only, e.g. a transform on the inputs.

    With ``batched=True`` the function is applied once per batch in ``get_batch``
    instead of once per item (it must then accept arrays with a leading batch axis).

    Example:
        >>> import numpy as np
        >>> base = TensorDataset(np.array([[1.0], [2.0]]), np.array([0, 1]))
        >>> doubled = MapDataset(base, lambda x: 2 * x, columns=(0,))
        >>> doubled[1][0].tolist()
        [4.0]
    """

    def __init__(
        self,
        dataset: Dataset,
        fn: Callable[..., Any],
        *,
        columns: Iterable[int] | None = None,
        batched: bool = False,
    ) -> None:
        self.dataset = dataset
        self.fn = fn
        self.columns = None if columns is None else tuple(columns)
        self.batched = batched

    def __len__(self) -> int:
        return len(self.dataset)

    def _apply(self, sample: Sample) -> Sample:
        if self.columns is None:
            out = self.fn(*sample)
            return tuple(out) if isinstance(out, tuple) else (np.asarray(out),)
        fields = list(sample)
        for c in self.columns:
            if not -len(fields) <= c < len(fields):
                raise DataError(
                    f"MapDataset: column {c} does not exist in a {len(fields)}-field sample"
                )
            fields[c] = np.asarray(self.fn(fields[c]))
        return tuple(fields)

    def __getitem__(self, index: int) -> Sample:
        return self._apply(self.dataset[index])

    def get_batch(self, indices: ArrayLike) -> Sample:
        if self.batched:
            return self._apply(self.dataset.get_batch(indices))
        return super().get_batch(indices)


class Subset(Dataset):
    """A view of ``dataset`` restricted to ``indices`` (in that order).

    Example:
        >>> import numpy as np
        >>> sub = Subset(TensorDataset(np.arange(5)), [4, 0])
        >>> [int(s[0]) for s in sub]
        [4, 0]
    """

    def __init__(self, dataset: Dataset, indices: ArrayLike) -> None:
        self.dataset = dataset
        self.indices = _as_index_array(indices, len(dataset), "Subset")

    def __len__(self) -> int:
        return int(self.indices.shape[0])

    def __getitem__(self, index: int) -> Sample:
        return self.dataset[int(self.indices[_check_index(index, len(self), "Subset")])]

    def get_batch(self, indices: ArrayLike) -> Sample:
        idx = _as_index_array(indices, len(self), "Subset")
        return self.dataset.get_batch(self.indices[idx])


class ConcatDataset(Dataset):
    """Several datasets one after the other.

    Example:
        >>> import numpy as np
        >>> a, b = TensorDataset(np.arange(2)), TensorDataset(np.arange(10, 13))
        >>> cat = ConcatDataset([a, b])
        >>> len(cat), int(cat[2][0])
        (5, 10)
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise DataError("ConcatDataset needs at least one dataset")
        self.offsets = np.cumsum([0] + [len(d) for d in self.datasets])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: int) -> Sample:
        i = _check_index(index, len(self), "ConcatDataset")
        which = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return self.datasets[which][i - int(self.offsets[which])]

    def get_batch(self, indices: ArrayLike) -> Sample:
        idx = _as_index_array(indices, len(self), "ConcatDataset")
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        order = np.argsort(which, kind="stable")
        parts = []
        for d in np.unique(which):
            local = idx[order][which[order] == d] - self.offsets[d]
            parts.append(self.datasets[int(d)].get_batch(local))
        grouped = tuple(np.concatenate(fields) for fields in zip(*parts, strict=True))
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return tuple(field[inverse] for field in grouped)
