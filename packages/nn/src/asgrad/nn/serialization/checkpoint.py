"""Checkpoint folders: one step's model, optimizer and training state, written atomically.

A checkpoint is a folder ``ckpt-<step>/`` holding

* ``model.safetensors``: the model's ``state_dict()``;
* ``optimizer.safetensors``: the array entries of the optimizer's ``state_dict()``
  (its scalar entries go to ``meta.json``), present only when an optimizer was saved;
* ``meta.json``: format version, step, epoch, metrics, scheduler state, the numpy RNG
  state, the user's ``extra`` (e.g. model config) and each file's size and checksum
  (see `meta`).

Writing takes the writer lock of the parent folder (see
`locking`), assembles the folder under a hidden name
``.tmp-<name>-<8 hex>``, flushes every file and then renames it into place: that
rename is the commit. Replacing an existing checkpoint first renames it to
``.old-<name>``, renames the new one into place and then deletes the old one; a crash
between the two renames leaves ``.old-<name>``, which `load_checkpoint` falls
back to and the next writer renames back. So a folder named ``<name>`` is always
whole, and at every moment one complete version of it can be loaded.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsFloat

import numpy as np
from numpy.typing import NDArray

from asgrad.nn.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointIOError,
    CheckpointNotFoundError,
)
from asgrad.nn.serialization.commit import Plan, commit_checkpoint, recover
from asgrad.nn.serialization.failures import translated
from asgrad.nn.serialization.locking import WriterLock
from asgrad.nn.serialization.meta import FORMAT, FORMAT_VERSION, META_FILE, check_json, parse_meta
from asgrad.nn.serialization.state import PathLike, as_tensors
from asgrad.nn.serialization.tensorfile import prepare, read_tensor_file

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_FILE",
    "MODEL_FILE",
    "OPTIMIZER_FILE",
    "CheckpointData",
    "load_checkpoint",
    "plan_checkpoint",
    "read_meta",
    "save_checkpoint",
]

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
_SAVE_FAILED = "the checkpoint previously at that path, if any, is unchanged"


def _to_json(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"object of type {type(value).__name__} is not JSON serializable")


def _rng_state(rng: np.random.Generator | np.random.BitGenerator) -> dict[str, Any]:
    bit_generator = rng.bit_generator if isinstance(rng, np.random.Generator) else rng
    state: dict[str, Any] = dict(bit_generator.state)
    return state


@dataclass
class CheckpointData:
    """Everything one checkpoint holds, as returned by `load_checkpoint`."""

    step: int
    model_state: dict[str, NDArray[Any]]
    optimizer_state: dict[str, Any] | None = None
    scheduler_state: dict[str, Any] | None = None
    rng_state: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    epoch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    #: True when every file was verified against its checksum; False for checkpoints
    #: saved before asgrad wrote checksums, which are only checked for size.
    verified: bool = False

    def restore_rng(self) -> np.random.Generator:
        """A ``numpy.random.Generator`` continuing exactly where the saved one stopped.

        Example:
            >>> import numpy as np
            >>> rng = np.random.default_rng(0)
            >>> data = CheckpointData(step=0, model_state={},
            ...                       rng_state=rng.bit_generator.state)
            >>> bool(data.restore_rng().random() == rng.random())
            True
        """
        if self.rng_state is None:
            raise CheckpointError("restore_rng: this checkpoint was saved without rng=")
        name = self.rng_state.get("bit_generator")
        bit_generator_type = getattr(np.random, str(name), None)
        if not isinstance(bit_generator_type, type) or not issubclass(
            bit_generator_type, np.random.BitGenerator
        ):
            raise CheckpointError(f"restore_rng: unknown bit generator {name!r}")
        bit_generator = bit_generator_type()
        try:
            bit_generator.state = self.rng_state
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointCorruptError(
                f"restore_rng: the saved {name} state is malformed ({exc!r}); the "
                "checkpoint's meta.json was edited or damaged",
                path=self.path,
            ) from exc
        return np.random.Generator(bit_generator)


def plan_checkpoint(
    model_state: Mapping[str, Any],
    *,
    step: int,
    epoch: int | None = None,
    optimizer_state: Mapping[str, Any] | None = None,
    scheduler_state: Mapping[str, Any] | None = None,
    rng: np.random.Generator | np.random.BitGenerator | None = None,
    metrics: Mapping[str, SupportsFloat] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Plan:
    """Check every argument of `save_checkpoint`; nothing touches the disk."""
    model = as_tensors(model_state, "save_checkpoint(model_state)")
    opt_arrays: dict[str, NDArray[Any]] = {}
    opt_scalars: dict[str, Any] = {}
    for k, v in (optimizer_state or {}).items():
        if isinstance(v, np.ndarray):
            opt_arrays[k] = v
        else:
            opt_scalars[k] = v
    files = {MODEL_FILE: prepare(model, {"format": FORMAT})}
    if optimizer_state is not None:
        arrays = as_tensors(opt_arrays, "save_checkpoint(optimizer_state)")
        files[OPTIMIZER_FILE] = prepare(arrays, {"format": FORMAT})
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "step": int(step),
        "epoch": None if epoch is None else int(epoch),
        "metrics": {k: float(v) for k, v in (metrics or {}).items()},
        "scheduler_state": None if scheduler_state is None else dict(scheduler_state),
        "rng_state": None if rng is None else _rng_state(rng),
        "extra": dict(extra or {}),
        "model_keys": list(model),
        "optimizer": None
        if optimizer_state is None
        else {"keys": list(optimizer_state), "scalars": opt_scalars},
    }
    check_json(meta, _to_json)
    return Plan(files, meta, _to_json)


def save_checkpoint(
    path: PathLike,
    model_state: Mapping[str, Any],
    *,
    step: int,
    epoch: int | None = None,
    optimizer_state: Mapping[str, Any] | None = None,
    scheduler_state: Mapping[str, Any] | None = None,
    rng: np.random.Generator | np.random.BitGenerator | None = None,
    metrics: Mapping[str, SupportsFloat] | None = None,
    extra: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write one checkpoint folder at ``path`` atomically; return ``path``.

    Optimizer entries that are arrays go to ``optimizer.safetensors``; its other entries
    (step counts, hyper-parameters) go to ``meta.json`` and must be JSON-able. Bad
    input raises [`InvalidStateError`][asgrad.nn.InvalidStateError] before anything is
    written. While it writes, the call holds the writer lock of the parent folder: if
    another writer (a `CheckpointManager` or a save in another process) holds
    it, [`CheckpointLockedError`][asgrad.nn.CheckpointLockedError] is raised. A refused write
    raises [`CheckpointIOError`][asgrad.nn.CheckpointIOError] and leaves any previous
    checkpoint at ``path`` in place.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     p = save_checkpoint(f"{tmp}/ckpt-000000007", {"w": np.ones(2)}, step=7,
        ...                         optimizer_state={"m.w": np.zeros(2), "t": 7})
        ...     data = load_checkpoint(p)
        ...     data.step, data.optimizer_state["t"]
        (7, 7)
    """
    target = Path(path)
    plan = plan_checkpoint(
        model_state,
        step=step,
        epoch=epoch,
        optimizer_state=optimizer_state,
        scheduler_state=scheduler_state,
        rng=rng,
        metrics=metrics,
        extra=extra,
    )
    with translated("save_checkpoint: cannot write", target, _SAVE_FAILED):
        target.parent.mkdir(parents=True, exist_ok=True)
        with WriterLock.acquire(target.parent, "save_checkpoint"):
            recover(target.parent, r".+")
            return commit_checkpoint(target, plan, overwrite)


def read_meta(folder: Path) -> dict[str, Any]:
    """The checked ``meta.json`` of checkpoint folder ``folder``."""
    path = folder / META_FILE
    with translated("cannot read", path, reading=True):
        if not path.is_file():
            raise CheckpointNotFoundError(
                f"{folder} is not a checkpoint folder: it has no {META_FILE}; check the path",
                path=folder,
            )
        return parse_meta(path.read_bytes(), path)


def _source(folder: Path) -> Path:
    """``folder``, or the previous version a crash left under ``.old-<name>``."""
    if folder.is_dir():
        return folder
    if folder.exists():
        raise CheckpointIOError(
            f"load_checkpoint: {folder} is a file, not a checkpoint folder; a single "
            "tensor file loads with load_state",
            path=folder,
            errno=errno.ENOTDIR,
        )
    old = folder.with_name(f".old-{folder.name}")
    if (old / META_FILE).is_file():
        return old
    raise CheckpointNotFoundError(
        f"load_checkpoint: no checkpoint at {folder}; check the path", path=folder
    )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _read(folder: Path) -> CheckpointData:
    meta = read_meta(folder)
    sums: dict[str, str] | None = meta.get("sha256")
    if MODEL_FILE not in meta["files"] or (
        sums is not None and sums.keys() != meta["files"].keys()
    ):
        raise CheckpointCorruptError(
            f"{folder / META_FILE} is damaged: its file list is incomplete", path=folder
        )
    loaded: dict[str, dict[str, NDArray[Any]]] = {}
    with translated("load_checkpoint: cannot read", folder, reading=True):
        for name, size in meta["files"].items():
            path = folder / name
            actual = path.stat().st_size if path.is_file() else None
            if actual != size:
                found = "no file" if actual is None else f"{actual} bytes"
                raise CheckpointCorruptError(
                    f"{path}: expected {size} bytes, found {found}; the checkpoint was "
                    "damaged after it was written. Load another checkpoint (an older step)",
                    path=path,
                )
            loaded[name], _, checksum = read_tensor_file(path)
            if sums is not None and sums[name] != checksum:
                raise CheckpointCorruptError(
                    f"{path} is damaged: its checksum is {checksum}, {META_FILE} says "
                    f"{sums[name]}; the file belongs to another checkpoint or was changed",
                    path=path,
                )
    try:
        model = {k: loaded[MODEL_FILE][k] for k in meta.get("model_keys", loaded[MODEL_FILE])}
        optimizer: dict[str, Any] | None = None
        if meta.get("optimizer") is not None:
            merged = {**loaded.get(OPTIMIZER_FILE, {}), **meta["optimizer"]["scalars"]}
            optimizer = {k: merged[k] for k in meta["optimizer"]["keys"]}
    except (KeyError, TypeError) as exc:
        raise CheckpointCorruptError(
            f"{folder} is damaged: {META_FILE} lists tensor {exc} that its files lack",
            path=folder,
        ) from exc
    return CheckpointData(
        step=meta["step"],
        model_state=model,
        optimizer_state=optimizer,
        scheduler_state=meta.get("scheduler_state"),
        rng_state=meta.get("rng_state"),
        metrics=meta.get("metrics", {}),
        epoch=meta.get("epoch"),
        extra=meta.get("extra", {}),
        path=folder,
        verified=sums is not None,
    )


def load_checkpoint(path: PathLike) -> CheckpointData:
    """Read a checkpoint folder written by `save_checkpoint`.

    Every file's size and checksum are checked against ``meta.json`` (whose own
    checksum is checked too): a damaged file raises
    [`CheckpointCorruptError`][asgrad.nn.CheckpointCorruptError] naming it. Checkpoints saved
    before checksums existed load with sizes checked only. A folder replaced or
    deleted by a writer while it is read is read again (up to three times).
    """
    folder = Path(path)
    attempt = 1
    while True:
        with translated("load_checkpoint: cannot read", folder, reading=True):
            source = _source(folder)
        identity = _identity(source)
        try:
            data = _read(source)
        except (CheckpointNotFoundError, CheckpointCorruptError):
            if attempt == 3 or _identity(source) == identity:
                raise
            attempt += 1
            continue
        data.path = folder
        return data
