"""The data pipeline: datasets, splits, samplers, the ``DataLoader`` and transforms.

Example:
    >>> import numpy as np
    >>> from asgrad.nn.data import DataLoader, TensorDataset, train_test_split
    >>> x, y = np.random.default_rng(0).normal(size=(100, 3)), np.arange(100) % 2
    >>> x_tr, x_te, y_tr, y_te = train_test_split(
    ...     x, y, test_size=0.2, seed=0, stratify=y
    ... )
    >>> train = TensorDataset(x_tr, y_tr)
    >>> loader = DataLoader(train, batch_size=32, shuffle=True, seed=0)
    >>> len(loader)
    3
"""

from asgrad.nn.data.dataset import (
    ConcatDataset,
    Dataset,
    MapDataset,
    Sample,
    Subset,
    TensorDataset,
    default_collate,
)
from asgrad.nn.data.loader import CollateFn, DataLoader
from asgrad.nn.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    WeightedRandomSampler,
)
from asgrad.nn.data.split import random_split, train_test_split
from asgrad.nn.data.transforms import (
    Clip,
    Compose,
    Flatten,
    Log,
    MinMaxScale,
    Normalize,
    OneHot,
    RandomNoise,
    StandardScale,
    Transform,
)
from asgrad.nn.errors import DataError

__all__ = [
    "BatchSampler",
    "Clip",
    "CollateFn",
    "Compose",
    "ConcatDataset",
    "DataError",
    "DataLoader",
    "Dataset",
    "Flatten",
    "Log",
    "MapDataset",
    "MinMaxScale",
    "Normalize",
    "OneHot",
    "RandomNoise",
    "RandomSampler",
    "Sample",
    "Sampler",
    "SequentialSampler",
    "StandardScale",
    "Subset",
    "TensorDataset",
    "Transform",
    "WeightedRandomSampler",
    "default_collate",
    "random_split",
    "train_test_split",
]
