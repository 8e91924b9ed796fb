"""``DistributedSampler``: each rank a disjoint shard of the dataset, per epoch."""

from __future__ import annotations

from collections.abc import Sized

import numpy as np
from numpy.typing import NDArray

from asgrad.nn.data.sampler import Sampler
from asgrad.nn.distributed.comm import broadcast, rank, world_size
from asgrad.nn.errors import DataError

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices of one rank: a disjoint shard of an epoch's order.

    Every rank draws the same order for epoch ``e`` (a permutation from
    ``numpy.random.default_rng([seed, e])`` with ``shuffle``, else ``0..n-1``), makes
    its length a multiple of ``num_replicas`` (``drop_last``: drops the tail; else pads
    by repeating the order from its start) and takes every ``num_replicas``-th index
    from position ``rank``. So each rank gets ``len(self)`` indices, the shards of
    one epoch are disjoint (apart from the padding), and batch ``j`` of ``B`` on every
    rank together hold the samples of one process's batch ``j`` of ``num_replicas * B``
    over the same order. Iterating advances the epoch; ``set_epoch(e)`` jumps to one.

    ``seed=None`` draws a seed on rank 0 and broadcasts it, so all ranks agree.
    ``num_replicas`` and ``rank`` default to the process group's.

    >>> [list(DistributedSampler(5, num_replicas=2, rank=r, shuffle=False)) for r in (0, 1)]
    [[0, 2, 4], [1, 3, 0]]
    >>> [len(DistributedSampler(5, num_replicas=2, rank=r, drop_last=True)) for r in (0, 1)]
    [2, 2]
    """

    def __init__(
        self,
        data_source: Sized | int,
        num_replicas: int | None = None,
        rank: int | None = None,
        *,
        shuffle: bool = True,
        seed: int | None = 0,
        drop_last: bool = False,
    ) -> None:
        n = data_source if isinstance(data_source, int) else len(data_source)
        if n < 0:
            raise DataError(f"DistributedSampler: dataset length must be >= 0, got {n}")
        replicas = world_size() if num_replicas is None else num_replicas
        if replicas < 1:
            raise DataError(f"DistributedSampler: num_replicas must be >= 1, got {replicas}")
        me = _own_rank() if rank is None else rank
        if not 0 <= me < replicas:
            raise DataError(f"DistributedSampler: rank must be in 0..{replicas - 1}, got {me}")
        if seed is None:
            drawn = np.random.default_rng().integers(0, 2**62, dtype=np.int64)
            seed = int(broadcast(np.array([drawn], np.int64))[0])
        if seed < 0:
            raise DataError(f"DistributedSampler: seed must be non-negative, got {seed}")
        self.n = n
        self.num_replicas = replicas
        self.rank = me
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.num_samples = n // replicas if drop_last else -(-n // replicas)
        self.total_size = self.num_samples * replicas

    def order(self) -> NDArray[np.intp]:
        """The whole epoch's order (the same on every rank), cut or padded to a multiple."""
        if self.shuffle:
            base = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            base = np.arange(self.n)
        if self.total_size <= base.size:
            return base[: self.total_size].astype(np.intp)
        reps = -(-self.total_size // base.size)
        return np.tile(base, reps)[: self.total_size].astype(np.intp)

    def indices(self) -> NDArray[np.intp]:
        return self.order()[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        return self.num_samples


def _own_rank() -> int:
    return rank()
