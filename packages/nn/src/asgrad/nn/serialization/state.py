"""Tensor files (plain safetensors, written atomically) and checking a loaded state.

Any safetensors reader can open the files. A write goes to a temporary file next to
the target, is flushed to disk and is then renamed onto the target, so a crash in
the middle of a save leaves the previous file intact.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy
from numpy.typing import DTypeLike, NDArray

from asgrad.nn.errors import CheckpointError, StateMismatchError
from asgrad.nn.serialization import atomic

__all__ = ["PathLike", "as_tensors", "check_state", "load_state", "read_metadata", "save_state"]

PathLike = str | os.PathLike[str]
_SUPPORTED = {np.dtype(t) for t in safetensors.numpy._TYPES.values()}


def as_tensors(state: Mapping[Any, Any], what: str) -> dict[str, NDArray[Any]]:
    """``state`` as C-contiguous arrays that safetensors can store, checked."""
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
    tensors = as_tensors(state, "save_state")
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
        atomic.fsync_file(tmp)
        os.replace(tmp, target)
        atomic.fsync_dir(target.parent)
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
