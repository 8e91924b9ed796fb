"""Splitting data: a dataset into random subsets, or arrays into train and test parts."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.data.dataset import Dataset, Subset
from asgrad.nn.errors import DataError

__all__ = ["random_split", "train_test_split"]


def random_split(
    dataset: Dataset, lengths: Sequence[float], seed: int | None = None
) -> list[Subset]:
    """Split ``dataset`` into disjoint random subsets of the given lengths.

    ``lengths`` are either integers summing to ``len(dataset)`` or fractions summing
    to 1; fractional sizes are floored and the remainder is handed out one by one from
    the first subset on.

    Example:
        >>> import numpy as np
        >>> from asgrad.nn.data import TensorDataset
        >>> train, val = random_split(TensorDataset(np.arange(10)), [0.8, 0.2], seed=0)
        >>> len(train), len(val)
        (8, 2)
    """
    n = len(dataset)
    if not lengths:
        raise DataError("random_split: lengths is empty")
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in lengths):
        sizes = [int(x) for x in lengths]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise DataError(
                f"random_split: lengths {sizes} must be non-negative and sum to the "
                f"dataset length {n}"
            )
    else:
        fracs = [float(x) for x in lengths]
        if any(f < 0 for f in fracs) or not math.isclose(sum(fracs), 1.0, abs_tol=1e-6):
            raise DataError(f"random_split: fractions {fracs} must be non-negative and sum to 1")
        sizes = [math.floor(n * f) for f in fracs]
        for k in range(n - sum(sizes)):
            sizes[k % len(sizes)] += 1
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([0, *sizes])
    return [Subset(dataset, perm[a:b]) for a, b in itertools.pairwise(bounds)]


def _split_size(value: float, n: int, name: str) -> int:
    if isinstance(value, bool):
        raise DataError(f"train_test_split: {name} must be an int or a float, not bool")
    if isinstance(value, (int, np.integer)):
        size = int(value)
    elif 0.0 < float(value) < 1.0:
        size = math.ceil(float(value) * n)
    else:
        raise DataError(
            f"train_test_split: {name}={value!r} must be a fraction in (0, 1) or a count"
        )
    if not 0 < size < n:
        raise DataError(
            f"train_test_split: {name}={value!r} leaves an empty train or test set for {n} samples"
        )
    return size


def _stratified_test_indices(
    labels: NDArray[Any], n_test: int, rng: np.random.Generator
) -> NDArray[np.intp]:
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    exact = counts * n_test / labels.shape[0]
    per_class = np.floor(exact).astype(np.intp)
    # Largest remainders first; random tie-break so no class is favoured systematically.
    remainder = exact - per_class
    order = np.lexsort((rng.random(classes.size), -remainder))
    per_class[order[: n_test - int(per_class.sum())]] += 1
    chosen = [
        rng.permutation(np.flatnonzero(inverse == c))[: per_class[c]] for c in range(classes.size)
    ]
    return rng.permutation(np.concatenate(chosen)).astype(np.intp)


def train_test_split(
    *arrays: ArrayLike,
    test_size: float = 0.25,
    seed: int | None = None,
    shuffle: bool = True,
    stratify: ArrayLike | None = None,
) -> list[NDArray[Any]]:
    """Split equal-length arrays into disjoint train and test parts.

    Returns ``[a_train, a_test, b_train, b_test, ...]`` like scikit-learn. Each row
    goes to exactly one side: the test rows are chosen first and the train rows are the
    complement, so the two sets are disjoint by construction. ``test_size`` is a
    fraction (rounded up) or a row count. With ``stratify=labels`` every class keeps its
    share in both parts (this needs ``shuffle=True``). With ``shuffle=False`` the last
    rows are the test set.

    Example:
        >>> import numpy as np
        >>> x, y = np.arange(10).reshape(5, 2), np.array([0, 1, 0, 1, 0])
        >>> x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.4, seed=0)
        >>> x_tr.shape, x_te.shape
        ((3, 2), (2, 2))
    """
    if not arrays:
        raise DataError("train_test_split needs at least one array")
    data = [np.asarray(a) for a in arrays]
    n = data[0].shape[0] if data[0].ndim else 0
    for k, a in enumerate(data):
        if a.ndim == 0 or a.shape[0] != n:
            raise DataError(
                f"train_test_split: array {k} has shape {a.shape} but array 0 has "
                f"{n} rows; "
                "all arrays need the same length along axis 0"
            )
    n_test = _split_size(test_size, n, "test_size")
    rng = np.random.default_rng(seed)
    if stratify is not None:
        if not shuffle:
            raise DataError("train_test_split: stratify needs shuffle=True")
        labels = np.asarray(stratify)
        if labels.shape[:1] != (n,):
            raise DataError(f"train_test_split: stratify has shape {labels.shape}, expected ({n},)")
        test_idx = _stratified_test_indices(labels, n_test, rng)
    elif shuffle:
        test_idx = rng.permutation(n)[:n_test].astype(np.intp)
    else:
        test_idx = np.arange(n - n_test, n, dtype=np.intp)
    in_test = np.zeros(n, dtype=bool)
    in_test[test_idx] = True
    train_idx = np.flatnonzero(~in_test)
    if shuffle:
        train_idx = rng.permutation(train_idx)
    out: list[NDArray[Any]] = []
    for a in data:
        out.extend((a[train_idx], a[test_idx]))
    return out
