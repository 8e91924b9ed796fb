"""Checkpoint folders: one step's model, optimizer and training state, written atomically.

A checkpoint is a folder ``ckpt-<step>/`` holding

* ``model.safetensors``: the model's ``state_dict()``;
* ``optimizer.safetensors``: the array entries of the optimizer's ``state_dict()``
  (its scalar entries go to ``meta.json``), present only when an optimizer was saved;
* ``meta.json``: format version, step, epoch, metrics, scheduler state, the numpy RNG
  state, the user's ``extra`` (e.g. model config) and the byte size of each file.

The folder is assembled under a hidden temporary name and renamed into place only when
complete, so a folder named ``ckpt-<step>`` is always whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsFloat

import numpy as np
import safetensors.numpy
from numpy.typing import NDArray

from asgrad.nn.errors import CheckpointError
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.state import PathLike, as_tensors, load_state

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_FILE",
    "MODEL_FILE",
    "OPTIMIZER_FILE",
    "CheckpointData",
    "load_checkpoint",
    "read_meta",
    "save_checkpoint",
]

FORMAT = "asgrad-checkpoint"
FORMAT_VERSION = 1
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
META_FILE = "meta.json"


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
    """Everything one checkpoint holds, as returned by :func:`load_checkpoint`."""

    step: int
    model_state: dict[str, NDArray[Any]]
    optimizer_state: dict[str, Any] | None = None
    scheduler_state: dict[str, Any] | None = None
    rng_state: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    epoch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

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
        bit_generator.state = self.rng_state
        return np.random.Generator(bit_generator)


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    try:
        text = json.dumps(payload, indent=2, default=_to_json)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"save_checkpoint: meta.json cannot hold a value: {exc}; scheduler_state, "
            "metrics, extra and the optimizer's non-array entries must be JSON-able "
            "(numbers, strings, lists, dicts)"
        ) from exc
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _write_tensors(path: Path, tensors: dict[str, NDArray[Any]]) -> int:
    safetensors.numpy.save_file(tensors, path, metadata={"format": FORMAT})
    atomic.fsync_file(path)
    return path.stat().st_size


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
    (step counts, hyper-parameters) go to ``meta.json`` and must be JSON-able.

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
    model = as_tensors(model_state, "save_checkpoint(model_state)")
    opt_arrays: dict[str, NDArray[Any]] = {}
    opt_scalars: dict[str, Any] = {}
    for k, v in (optimizer_state or {}).items():
        if isinstance(v, np.ndarray):
            opt_arrays[k] = v
        else:
            opt_scalars[k] = v
    opt_arrays = as_tensors(opt_arrays, "save_checkpoint(optimizer_state)")
    if target.exists() and not overwrite:
        raise CheckpointError(
            f"save_checkpoint: {target} already exists; pass overwrite=True to replace it"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    try:
        sizes = {MODEL_FILE: _write_tensors(tmp / MODEL_FILE, model)}
        if optimizer_state is not None:
            sizes[OPTIMIZER_FILE] = _write_tensors(tmp / OPTIMIZER_FILE, opt_arrays)
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "step": int(step),
            "epoch": None if epoch is None else int(epoch),
            "created": time.time(),
            "metrics": {k: float(v) for k, v in (metrics or {}).items()},
            "scheduler_state": None if scheduler_state is None else dict(scheduler_state),
            "rng_state": None if rng is None else _rng_state(rng),
            "extra": dict(extra or {}),
            "model_keys": list(model),
            "optimizer": None
            if optimizer_state is None
            else {"keys": list(optimizer_state), "scalars": opt_scalars},
            "files": sizes,
        }
        _write_json(tmp / META_FILE, meta)  # written last: marks the folder complete
        atomic.fsync_dir(tmp)
        if target.exists():
            atomic.remove_tree(target)
        os.rename(tmp, target)  # the commit point
        atomic.fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_meta(folder: Path) -> dict[str, Any]:
    """The checked ``meta.json`` of a checkpoint folder; raises if it is not complete."""
    try:
        with open(folder / META_FILE, encoding="utf-8") as f:
            meta: dict[str, Any] = json.load(f)
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"{folder} is not a complete checkpoint ({META_FILE} unreadable: {exc})"
        ) from exc
    if meta.get("format") != FORMAT or not isinstance(meta.get("version"), int):
        raise CheckpointError(f"{folder / META_FILE} is not an {FORMAT} file")
    if meta["version"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{folder} uses checkpoint format version {meta['version']}, newer than "
            f"this asgrad's {FORMAT_VERSION}; upgrade asgrad to load it"
        )
    return meta


def load_checkpoint(path: PathLike) -> CheckpointData:
    """Read a checkpoint folder written by :func:`save_checkpoint`.

    File sizes are checked against ``meta.json``, so a truncated file raises
    :class:`CheckpointError` instead of loading garbage.
    """
    folder = Path(path)
    meta = read_meta(folder)
    for name, size in meta["files"].items():
        actual = (folder / name).stat().st_size if (folder / name).is_file() else None
        if actual != size:
            raise CheckpointError(
                f"{folder / name}: expected {size} bytes, found "
                f"{'no file' if actual is None else f'{actual} bytes'}; the checkpoint "
                "was damaged after it was written"
            )
    model = load_state(folder / MODEL_FILE)
    model = {k: model[k] for k in meta.get("model_keys", model)}
    optimizer: dict[str, Any] | None = None
    if meta.get("optimizer") is not None:
        arrays = load_state(folder / OPTIMIZER_FILE)
        merged = {**arrays, **meta["optimizer"]["scalars"]}
        optimizer = {k: merged[k] for k in meta["optimizer"]["keys"]}
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
    )
