"""Saving and loading tensors and training checkpoints, crash-safely.

Tensor files are plain safetensors (https://github.com/huggingface/safetensors), so
any safetensors reader can open them. Every write is atomic: data goes to a temporary
file (or folder) next to the target, is flushed to disk with ``fsync``, and is then
renamed onto the target, so a crash in the middle of a save leaves the previous file
intact; the next writer deletes what a killed save left. Every file carries a SHA-256
checksum that loading verifies. One folder of checkpoints takes one writer at a time
(a lock file, ``.asgrad.lock``); a second gets
[`CheckpointLockedError`][asgrad.nn.CheckpointLockedError].

A checkpoint is a folder ``ckpt-<step>/`` holding

* ``model.safetensors``: the model's ``state_dict()``;
* ``optimizer.safetensors``: the array entries of the optimizer's ``state_dict()``
  (its scalar entries go to ``meta.json``), present only when an optimizer was saved;
* ``meta.json``: format version, step, epoch, metrics, scheduler state, the numpy RNG
  state, the user's ``extra`` (e.g. model config), each file's size and checksum, and
  its own checksum.

The folder is assembled under a hidden temporary name and renamed into place only when
complete, so a folder named ``ckpt-<step>`` is always whole; `CheckpointManager`
ignores anything else.

Errors are [`CheckpointError`][asgrad.nn.CheckpointError] subclasses naming the path:
[`CheckpointNotFoundError`][asgrad.nn.CheckpointNotFoundError],
[`CheckpointCorruptError`][asgrad.nn.CheckpointCorruptError] (failed checksum or format check),
[`CheckpointIOError`][asgrad.nn.CheckpointIOError] (the disk refused; an ``OSError``),
[`CheckpointLockedError`][asgrad.nn.CheckpointLockedError] and
[`InvalidStateError`][asgrad.nn.InvalidStateError] (bad input to a saver).

One module per concern: `atomic` (durable file-system
primitives), `failures` (OS errors to asgrad errors),
`locking` (writer locks),
`tensorfile` (the safetensors format with checksums),
`state` (tensor files, state checks),
`meta` (``meta.json``),
`commit` (the commit protocol and crash recovery),
`checkpoint` (the checkpoint folder format) and
`manager` (numbering, rotation, latest and best).

Example:
    >>> import tempfile, numpy as np
    >>> from asgrad.nn.serialization import load_state, save_state
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     w = {"w": np.ones((2, 2), np.float32)}
    ...     path = save_state(f"{tmp}/w.safetensors", w)
    ...     load_state(path)["w"].sum()
    np.float32(4.0)
"""

from asgrad.nn.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointIOError,
    CheckpointLockedError,
    CheckpointNotFoundError,
    InvalidStateError,
    StateMismatchError,
)
from asgrad.nn.serialization.checkpoint import (
    FORMAT,
    FORMAT_VERSION,
    META_FILE,
    MODEL_FILE,
    OPTIMIZER_FILE,
    CheckpointData,
    load_checkpoint,
    save_checkpoint,
)
from asgrad.nn.serialization.manager import CheckpointManager
from asgrad.nn.serialization.state import (
    PathLike,
    check_state,
    load_state,
    read_metadata,
    save_state,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_FILE",
    "MODEL_FILE",
    "OPTIMIZER_FILE",
    "CheckpointCorruptError",
    "CheckpointData",
    "CheckpointError",
    "CheckpointIOError",
    "CheckpointLockedError",
    "CheckpointManager",
    "CheckpointNotFoundError",
    "InvalidStateError",
    "PathLike",
    "StateMismatchError",
    "check_state",
    "load_checkpoint",
    "load_state",
    "read_metadata",
    "save_checkpoint",
    "save_state",
]
