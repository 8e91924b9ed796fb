"""Saving and loading tensors and training checkpoints, crash-safely.

Tensor files are plain safetensors (https://github.com/huggingface/safetensors), so
any safetensors reader can open them. Every write is atomic: data goes to a temporary
file (or folder) next to the target, is flushed to disk with ``fsync``, and is then
renamed onto the target, so a crash in the middle of a save leaves the previous file
intact.

A checkpoint is a folder ``ckpt-<step>/`` holding

* ``model.safetensors``: the model's ``state_dict()``;
* ``optimizer.safetensors``: the array entries of the optimizer's ``state_dict()``
  (its scalar entries go to ``meta.json``), present only when an optimizer was saved;
* ``meta.json``: format version, step, epoch, metrics, scheduler state, the numpy RNG
  state, the user's ``extra`` (e.g. model config) and the byte size of each file.

The folder is assembled under a hidden temporary name and renamed into place only when
complete, so a folder named ``ckpt-<step>`` is always whole; :class:`CheckpointManager`
ignores anything else.

Example:
    >>> import tempfile, numpy as np
    >>> from asgrad.nn.serialization import load_state, save_state
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     w = {"w": np.ones((2, 2), np.float32)}
    ...     path = save_state(f"{tmp}/w.safetensors", w)
    ...     load_state(path)["w"].sum()
    np.float32(4.0)
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, SupportsFloat

import numpy as np
import safetensors
import safetensors.numpy
from numpy.typing import DTypeLike, NDArray

from asgrad.nn.errors import CheckpointError, StateMismatchError

__all__ = [
    "CheckpointData",
    "CheckpointError",
    "CheckpointManager",
    "StateMismatchError",
    "check_state",
    "load_checkpoint",
    "load_state",
    "read_metadata",
    "save_checkpoint",
    "save_state",
]

PathLike = str | os.PathLike[str]
FORMAT = "asgrad-checkpoint"
FORMAT_VERSION = 1
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
META_FILE = "meta.json"
_SUPPORTED = {np.dtype(t) for t in safetensors.numpy._TYPES.values()}

# ------------------------------------------------------------------------------------
# durable file-system primitives


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    # Makes a rename inside `path` durable. Windows cannot open folders this way.
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_tree(path: Path) -> None:
    """Delete a folder so that no half-deleted copy is left under its name."""
    doomed = path.with_name(f".trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(path, doomed)
    _fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)


# ------------------------------------------------------------------------------------
# single tensor files


def _tensors(state: Mapping[Any, Any], what: str) -> dict[str, NDArray[Any]]:
    out: dict[str, NDArray[Any]] = {}
    for key, value in state.items():
        if not isinstance(key, str) or not key:
            raise CheckpointError(f"{what}: keys must be non-empty strings, got {key!r}")
        array = np.asarray(value)
        if array.dtype not in _SUPPORTED:
            names = ", ".join(sorted(str(d) for d in _SUPPORTED))
            raise CheckpointError(
                f"{what}: tensor {key!r} has dtype {array.dtype}, which safetensors "
                f"cannot store; convert it to one of: {names}"
            )
        # Not np.ascontiguousarray: it turns 0-d arrays into shape (1,).
        out[key] = array if array.flags.c_contiguous else array.copy(order="C")
    return out


def save_state(
    path: PathLike,
    state: Mapping[str, Any],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write named arrays to a safetensors file, atomically; return the path.

    ``metadata`` is a flat ``str -> str`` mapping stored in the file header.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = f"{tmp}/s.safetensors"
        ...     p = save_state(path, {"b": np.zeros(3)}, metadata={"note": "hi"})
        ...     read_metadata(p)
        {'note': 'hi'}
    """
    target = Path(path)
    tensors = _tensors(state, "save_state")
    meta = dict(metadata or {})
    pairs: list[tuple[object, object]] = list(meta.items())
    for k, v in pairs:
        if not isinstance(k, str) or not isinstance(v, str):
            raise CheckpointError(
                f"save_state: metadata must map str to str, got {k!r}: {v!r}; "
                "use json.dumps for structured values"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        safetensors.numpy.save_file(tensors, tmp, metadata=meta or None)
        _fsync_file(tmp)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def load_state(path: PathLike) -> dict[str, NDArray[Any]]:
    """Read every tensor of a safetensors file (keys in sorted order).

    Raises :class:`CheckpointError` if the file is missing or not valid safetensors.
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"load_state: no file at {p}")
    try:
        return dict(safetensors.numpy.load_file(p))
    except Exception as exc:  # safetensors raises its own error type, or OSError
        raise CheckpointError(
            f"load_state: {p} is not a readable safetensors file (truncated or corrupt?): {exc}"
        ) from exc


def read_metadata(path: PathLike) -> dict[str, str]:
    """The ``str -> str`` metadata stored in a safetensors file's header."""
    try:
        with safetensors.safe_open(str(path), framework="np") as f:
            meta = f.metadata()
    except Exception as exc:
        raise CheckpointError(f"read_metadata: cannot read {path}: {exc}") from exc
    return dict(meta or {})


# ------------------------------------------------------------------------------------
# state checking

Spec = tuple[tuple[int, ...], DTypeLike]


def _spec(value: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(value.shape), np.dtype(value.dtype)
    shape, dtype = value
    return tuple(shape), np.dtype(dtype)


def _describe(spec: tuple[tuple[int, ...], np.dtype[Any]]) -> str:
    return f"{spec[0]} {spec[1]}"


def check_state(
    expected: Mapping[str, Any],
    loaded: Mapping[str, Any],
    *,
    strict: bool = True,
) -> None:
    """Raise one :class:`StateMismatchError` listing every difference, or return.

    ``expected`` maps names to arrays (e.g. ``model.state_dict()``) or to
    ``(shape, dtype)`` pairs. Missing and mismatched (shape or dtype) tensors are always
    errors; unexpected extra tensors only when ``strict``.

    Example:
        >>> import numpy as np
        >>> want = {"w": ((2, 3), "float32"), "b": ((3,), "float32")}
        >>> try:
        ...     check_state(want, {"w": np.zeros((3, 2), np.float32)})
        ... except StateMismatchError as e:
        ...     print(e.missing, e.mismatched)
        ['b'] ['w']
    """
    want = {k: _spec(v) for k, v in expected.items()}
    got = {k: _spec(v) for k, v in loaded.items()}
    missing = sorted(want.keys() - got.keys())
    unexpected = sorted(got.keys() - want.keys()) if strict else []
    mismatched = sorted(k for k in want.keys() & got.keys() if want[k] != got[k])
    if not (missing or unexpected or mismatched):
        return
    lines = [
        f"state does not match: {len(missing)} missing, {len(unexpected)} unexpected, "
        f"{len(mismatched)} mismatched tensor(s)"
    ]
    extra_names = sorted(got.keys() - want.keys())
    for k in missing:
        close = difflib.get_close_matches(k, extra_names, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        lines.append(f"  missing     {k}: expected {_describe(want[k])}{guess}")
    lines.extend(f"  unexpected  {k}: {_describe(got[k])}" for k in unexpected)
    for k in mismatched:
        (ws, wd), (gs, _) = want[k], got[k]
        why = " (transposed?)" if len(ws) == 2 and gs == ws[::-1] else ""
        if ws == gs:
            why = f" (cast with .astype({wd.name!r}) if the values are right)"
        lines.append(
            f"  mismatched  {k}: expected {_describe(want[k])}, got {_describe(got[k])}{why}"
        )
    lines.append(
        "hint: the checkpoint was probably saved from a model built with other "
        "arguments (compare with the 'extra' config in meta.json), or names changed; "
        "strict=False ignores unexpected tensors"
    )
    raise StateMismatchError(
        "\n".join(lines), missing=missing, unexpected=unexpected, mismatched=mismatched
    )


# ------------------------------------------------------------------------------------
# checkpoint folders


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
    _fsync_file(path)
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
    model = _tensors(model_state, "save_checkpoint(model_state)")
    opt_arrays: dict[str, NDArray[Any]] = {}
    opt_scalars: dict[str, Any] = {}
    for k, v in (optimizer_state or {}).items():
        if isinstance(v, np.ndarray):
            opt_arrays[k] = v
        else:
            opt_scalars[k] = v
    opt_arrays = _tensors(opt_arrays, "save_checkpoint(optimizer_state)")
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
        _fsync_dir(tmp)
        if target.exists():
            _remove_tree(target)
        os.rename(tmp, target)  # the commit point
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _read_meta(folder: Path) -> dict[str, Any]:
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
    meta = _read_meta(folder)
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


# ------------------------------------------------------------------------------------
# rotation


_CKPT_NAME = re.compile(r"^ckpt-(\d+)$")


class CheckpointManager:
    """Save numbered checkpoints into one folder, rotate old ones, find latest/best.

    ``keep_last`` newest checkpoints are kept (``None``: all); with ``keep_best`` the
    checkpoint with the best ``metrics[metric]`` (lowest for ``mode="min"``, highest
    for ``"max"``; the earliest on ties) is never deleted. "Latest" means the highest
    step. Only complete checkpoint folders are ever listed or loaded.

    One process writes to a folder at a time; any number may read it.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     mgr = CheckpointManager(tmp, keep_last=2, metric="val_loss")
        ...     for step, loss in [(1, 0.5), (2, 0.9), (3, 0.8)]:
        ...         state = {"w": np.full(2, step)}
        ...         _ = mgr.save(step, state, metrics={"val_loss": loss})
        ...     mgr.steps(), mgr.load("best").step, mgr.load().step
        ([1, 2, 3], 1, 3)
    """

    def __init__(
        self,
        directory: PathLike,
        keep_last: int | None = 3,
        keep_best: bool = True,
        metric: str = "val_loss",
        mode: Literal["min", "max"] = "min",
    ) -> None:
        if keep_last is not None and keep_last < 1:
            raise CheckpointError(
                f"CheckpointManager: keep_last must be >= 1 or None, got {keep_last}"
            )
        if mode not in ("min", "max"):
            raise CheckpointError(f"CheckpointManager: mode must be 'min' or 'max', got {mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.keep_best = keep_best
        self.metric = metric
        self.mode = mode

    def path_for(self, step: int) -> Path:
        """The folder that checkpoint ``step`` lives in."""
        if step < 0:
            raise CheckpointError(f"CheckpointManager: step must be >= 0, got {step}")
        return self.directory / f"ckpt-{step:09d}"

    def steps(self) -> list[int]:
        """Steps of all complete checkpoints, ascending."""
        if not self.directory.is_dir():
            return []
        found = []
        for entry in self.directory.iterdir():
            match = _CKPT_NAME.match(entry.name)
            if match and (entry / META_FILE).is_file():
                found.append(int(match.group(1)))
        return sorted(found)

    def _folder(self, step: int) -> Path:
        for entry in self.directory.iterdir():
            match = _CKPT_NAME.match(entry.name)
            if match and int(match.group(1)) == step:
                return entry
        raise CheckpointError(f"no checkpoint for step {step} in {self.directory}")

    def latest(self) -> Path | None:
        """Folder of the checkpoint with the highest step, or None."""
        steps = self.steps()
        return self._folder(steps[-1]) if steps else None

    def _best_step(self) -> int | None:
        best: tuple[float, int] | None = None
        sign = 1.0 if self.mode == "min" else -1.0
        for step in self.steps():
            try:
                value = _read_meta(self._folder(step))["metrics"].get(self.metric)
            except CheckpointError:
                continue
            if value is None or math.isnan(value):
                continue
            if best is None or sign * value < best[0]:
                best = (sign * value, step)
        return None if best is None else best[1]

    def best(self) -> Path | None:
        """Folder of the checkpoint with the best ``metric``, or None if none has it."""
        step = self._best_step()
        return None if step is None else self._folder(step)

    def save(
        self,
        step: int,
        model_state: Mapping[str, Any],
        optimizer_state: Mapping[str, Any] | None = None,
        scheduler_state: Mapping[str, Any] | None = None,
        rng: np.random.Generator | np.random.BitGenerator | None = None,
        metrics: Mapping[str, SupportsFloat] | None = None,
        extra: Mapping[str, Any] | None = None,
        *,
        epoch: int | None = None,
    ) -> Path:
        """Write checkpoint ``step`` (replacing one of the same step), then rotate."""
        self.cleanup()
        path = save_checkpoint(
            self.path_for(step),
            model_state,
            step=step,
            epoch=epoch,
            optimizer_state=optimizer_state,
            scheduler_state=scheduler_state,
            rng=rng,
            metrics=metrics,
            extra=extra,
            overwrite=True,
        )
        self.rotate()
        return path

    def rotate(self) -> list[int]:
        """Delete checkpoints beyond ``keep_last`` except the best; return steps."""
        if self.keep_last is None:
            return []
        steps = self.steps()
        keep = set(steps[-self.keep_last :])
        if self.keep_best:
            best = self._best_step()
            if best is not None:
                keep.add(best)
        removed = [s for s in steps if s not in keep]
        for step in removed:
            _remove_tree(self._folder(step))
        return removed

    def cleanup(self) -> list[Path]:
        """Remove leftovers of interrupted saves and deletions; return what went."""
        if not self.directory.is_dir():
            return []
        stale = [
            p
            for p in self.directory.iterdir()
            if p.is_dir() and p.name.startswith((".tmp-ckpt-", ".trash-ckpt-"))
        ]
        for p in stale:
            shutil.rmtree(p, ignore_errors=True)
        return stale

    def load(
        self,
        which: Literal["latest", "best"] | int = "latest",
        expected: Mapping[str, Any] | None = None,
        strict: bool = True,
    ) -> CheckpointData:
        """Load the latest, the best, or a given step's checkpoint.

        With ``expected`` (e.g. ``model.state_dict()``) the model state is checked by
        :func:`check_state` before it is returned.
        """
        if which == "latest":
            folder = self.latest()
        elif which == "best":
            folder = self.best()
        elif isinstance(which, int):
            folder = self._folder(which) if which in self.steps() else None
        else:
            raise CheckpointError(f"load: which must be 'latest', 'best' or a step, got {which!r}")
        if folder is None:
            raise CheckpointError(
                f"no {which if isinstance(which, str) else f'step {which}'} "
                "checkpoint in "
                f"{self.directory} (complete steps: {self.steps() or 'none'})"
            )
        data = load_checkpoint(folder)
        if expected is not None:
            check_state(expected, data.model_state, strict=strict)
        return data
