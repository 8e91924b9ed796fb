"""``--distributed``: what the examples share to train data-parallel under ``mpirun``."""

from __future__ import annotations

from asgrad.nn import distributed as dist
from asgrad.tensor import AsgradError


def setup(enabled: bool) -> tuple[int, int]:
    """Join the process group when ``enabled``; returns ``(rank, world size)``.

    Without ``--distributed`` this is ``(0, 1)`` even under ``mpirun`` (every rank
    would train alone). A missing mpi4py ends the program with one line.
    """
    if not enabled:
        return 0, 1
    try:
        dist.init()
    except AsgradError as exc:
        raise SystemExit(f"error: --distributed: {exc}") from None
    return dist.rank(), dist.world_size()


def per_rank(batch_size: int, ranks: int) -> int:
    """Each rank's share of a global ``batch_size`` (which the ranks must divide)."""
    if batch_size % ranks:
        raise SystemExit(
            f"error: --distributed: the batch size {batch_size} does not divide among"
            f" {ranks} ranks; pass a --batch-size that is a multiple of {ranks}"
        )
    return batch_size // ranks
