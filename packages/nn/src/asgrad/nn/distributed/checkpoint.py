"""Checkpoints in data-parallel training: rank 0 writes, every rank resumes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from asgrad.nn.distributed.comm import all_gather_object, barrier, broadcast_object, rank
from asgrad.nn.errors import CheckpointNotFoundError, DistributedError
from asgrad.nn.serialization import CheckpointData, CheckpointManager

__all__ = ["load", "save"]


def save(manager: CheckpointManager, step: int, *args: Any, **kwargs: Any) -> Path | None:
    """Rank 0 saves with ``manager.save(step, ...)``; every rank waits until it is on disk.

    The arguments are `CheckpointManager.save`'s (rank 0's values are saved:
    the ranks hold the same parameters and optimizer state). Returns the folder on
    rank 0, ``None`` on the others. If rank 0's save fails, rank 0 raises its error
    and every other rank a [`DistributedError`][asgrad.nn.distributed.DistributedError] naming it.

    In one process, rank 0 is the only rank:

    >>> import tempfile, numpy as np
    >>> from asgrad.nn.serialization import CheckpointManager
    >>> from asgrad.nn import distributed as dist
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with CheckpointManager(tmp) as mgr:
    ...         path = dist.save(mgr, 1, {"w": np.zeros(2)})
    ...         path.name
    'ckpt-000000001'
    """
    path: Path | None = None
    failure: str | None = None
    error: BaseException | None = None
    if rank() == 0:
        try:
            path = manager.save(step, *args, **kwargs)
        except Exception as exc:
            error = exc
            failure = f"{type(exc).__name__}: {exc}"
    failure = broadcast_object(failure)
    if error is not None:
        raise error
    if failure is not None:
        raise DistributedError(f"rank 0 could not save checkpoint {step}: {failure}")
    return path


def load(
    manager: CheckpointManager,
    which: Literal["latest", "best"] | int = "latest",
    expected: Mapping[str, Any] | None = None,
    strict: bool = True,
) -> CheckpointData:
    """Every rank loads the same checkpoint (rank 0 picks the step; see ``manager.load``).

    Rank 0 resolves ``which`` to a step and every rank loads that step, so ranks
    cannot resume from different steps. Without a checkpoint every rank raises
    [`CheckpointNotFoundError`][asgrad.nn.CheckpointNotFoundError] (start afresh); another failure
    on rank 0 raises there and is a [`DistributedError`][asgrad.nn.distributed.DistributedError] on
    the others.

    In one process:

    >>> import tempfile, numpy as np
    >>> from asgrad.nn.serialization import CheckpointManager
    >>> from asgrad.nn import distributed as dist
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with CheckpointManager(tmp) as mgr:
    ...         _ = dist.save(mgr, 7, {"w": np.zeros(2)})
    ...         dist.load(mgr).step
    7
    """
    barrier()
    step: int | None = None
    failure: tuple[bool, str] | None = None
    error: BaseException | None = None
    if rank() == 0:
        try:
            step = manager.load(which, expected, strict).step
        except Exception as exc:
            error = exc
            failure = (isinstance(exc, CheckpointNotFoundError), f"{type(exc).__name__}: {exc}")
    step, failure = broadcast_object((step, failure))
    if error is not None:
        raise error
    if failure is not None:
        not_found, message = failure
        if not_found:  # every rank can tell "nothing to resume" from a failure
            raise CheckpointNotFoundError(f"on rank 0: {message}", path=manager.directory)
        raise DistributedError(f"rank 0 could not load checkpoint {which!r}: {message}")
    assert step is not None
    data = manager.load(step, expected, strict)
    steps = all_gather_object(data.step)
    if len(set(steps)) > 1:
        raise DistributedError(f"the ranks loaded different checkpoints (steps {steps})")
    return data
