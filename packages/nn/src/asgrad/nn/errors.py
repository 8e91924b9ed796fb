"""Exceptions raised by the data, metrics and serialization parts of ``asgrad.nn``.

Every class derives from [`AsgradError`][asgrad.tensor.AsgradError], so one
``except AsgradError`` catches every error asgrad raises, and also from the built-in
exception a plain Python user would expect (``ValueError`` for bad input, ``KeyError``
for a state that does not match), so ``except ValueError`` keeps working.

Example:
    >>> from asgrad.nn.errors import CheckpointError, NNError
    >>> from asgrad.tensor.errors import AsgradError
    >>> issubclass(CheckpointError, NNError), issubclass(NNError, AsgradError)
    (True, True)
"""

from __future__ import annotations

from asgrad.tensor.errors import AsgradError

__all__ = [
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointIOError",
    "CheckpointLockedError",
    "CheckpointNotFoundError",
    "DataError",
    "DistributedError",
    "DistributedTimeoutError",
    "InvalidStateError",
    "MetricError",
    "NNError",
    "RecompileWarning",
    "StateMismatchError",
    "UnknownMetricError",
    "UnsafeCheckpointError",
]


class NNError(AsgradError):
    """Base class of the errors that only ``asgrad.nn`` raises.

    >>> from asgrad.nn import NNError
    >>> [c.__name__ for c in NNError.__bases__]
    ['AsgradError']
    """


class DataError(NNError, ValueError):
    """A dataset, sampler, loader or transform was given inconsistent input.

    >>> from asgrad.nn import DataError
    >>> [c.__name__ for c in DataError.__bases__]
    ['NNError', 'ValueError']
    """


class MetricError(NNError, ValueError):
    """A metric was given arrays of the wrong shape, dtype or content.

    >>> from asgrad.nn import MetricError
    >>> [c.__name__ for c in MetricError.__bases__]
    ['NNError', 'ValueError']
    """


class UnknownMetricError(MetricError, KeyError):
    """A metric was asked for by a name that was never logged.

    >>> from asgrad.nn import UnknownMetricError
    >>> [c.__name__ for c in UnknownMetricError.__bases__]
    ['MetricError', 'KeyError']
    """


class CheckpointError(NNError):
    """A tensor file or checkpoint directory could not be written, read or matched.

    ``path`` names the file or folder concerned when there is one (else None).

    >>> from asgrad.nn import CheckpointError
    >>> [c.__name__ for c in CheckpointError.__bases__]
    ['NNError']
    """

    def __init__(self, message: str, *, path: object = None) -> None:
        super().__init__(message)
        self.path = path


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint or tensor file where one was asked for (or it was deleted mid-read).

    >>> from asgrad.nn import CheckpointNotFoundError
    >>> [c.__name__ for c in CheckpointNotFoundError.__bases__]
    ['CheckpointError', 'FileNotFoundError']
    """


class CheckpointCorruptError(CheckpointError, ValueError):
    """A file failed its checksum or format check: it was damaged after it was written.

    Re-saving cannot repair it; load another checkpoint (for example an older step).

    >>> from asgrad.nn import CheckpointCorruptError
    >>> [c.__name__ for c in CheckpointCorruptError.__bases__]
    ['CheckpointError', 'ValueError']
    """


class CheckpointIOError(CheckpointError, OSError):
    """The file system refused a read or write: disk full, read-only folder, no permission,
    a folder where a file belongs. ``errno`` is the refused call's error number.

    A failed save leaves the previous file or checkpoint as it was.

    >>> from asgrad.nn import CheckpointIOError
    >>> [c.__name__ for c in CheckpointIOError.__bases__]
    ['CheckpointError', 'OSError']
    """

    def __init__(self, message: str, *, path: object = None, errno: int | None = None) -> None:
        super().__init__(message, path=path)
        self.errno = errno


class CheckpointLockedError(CheckpointError):
    """Another writer holds the folder's writer lock; one folder takes one writer at a time.

    >>> from asgrad.nn import CheckpointLockedError
    >>> [c.__name__ for c in CheckpointLockedError.__bases__]
    ['CheckpointError']
    """


class InvalidStateError(CheckpointError, ValueError):
    """A saver was given something it cannot store (a key, dtype or metadata value).

    >>> from asgrad.nn import InvalidStateError
    >>> [c.__name__ for c in InvalidStateError.__bases__]
    ['CheckpointError', 'ValueError']
    """


class StateMismatchError(CheckpointError, KeyError):
    """A loaded state does not match the expected one.

    Attributes list every problem at once, so one run shows everything to fix.

    >>> from asgrad.nn import StateMismatchError
    >>> [c.__name__ for c in StateMismatchError.__bases__]
    ['CheckpointError', 'KeyError']
    """

    def __init__(
        self,
        message: str,
        *,
        missing: list[str] | None = None,
        unexpected: list[str] | None = None,
        mismatched: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing or []
        self.unexpected = unexpected or []
        self.mismatched = mismatched or []

    def __str__(self) -> str:
        # KeyError would repr() the message, which garbles a multi-line report.
        return self.message


# -- PyTorch checkpoints ----------------------------------------------------------------------
class UnsafeCheckpointError(CheckpointError):
    """A PyTorch file holds more than tensors (pickled code or objects); it is not loaded.

    >>> from asgrad.nn import UnsafeCheckpointError
    >>> [c.__name__ for c in UnsafeCheckpointError.__bases__]
    ['CheckpointError']
    """


# -- asgrad.nn.distributed ---------------------------------------------------------------


class DistributedError(NNError, RuntimeError):
    """Data-parallel training cannot go on: MPI is missing, or the ranks disagree.

    >>> from asgrad.nn.distributed import DistributedError
    >>> [c.__name__ for c in DistributedError.__bases__]
    ['NNError', 'RuntimeError']
    """


class DistributedTimeoutError(DistributedError, TimeoutError):
    """A collective did not complete in time: another rank died, hung or took another path.

    A [`DistributedError`][asgrad.nn.distributed.DistributedError] and a ``TimeoutError``:

    >>> from asgrad.nn.distributed import DistributedError, DistributedTimeoutError
    >>> [c.__name__ for c in DistributedTimeoutError.__bases__]
    ['DistributedError', 'TimeoutError']
    """


class RecompileWarning(UserWarning):
    """An optimizer compiled many programs for graphs rebuilt in a loop; build the graph
    and compile once, then call the step per batch.

    A warning, so it can be turned into an error while testing a training loop:

    >>> import warnings
    >>> from asgrad.nn import RecompileWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", RecompileWarning)
    ...     try:
    ...         warnings.warn("compiled 10 programs", RecompileWarning)
    ...     except RecompileWarning as e:
    ...         print(e)
    compiled 10 programs
    """
