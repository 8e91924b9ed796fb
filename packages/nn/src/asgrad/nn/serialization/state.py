"""Tensor files (plain safetensors, written atomically, checksummed) and state checks.

Any safetensors reader can open the files. A write goes to a temporary file next to
the target, is flushed to disk and is then renamed onto the target, so a crash in the
middle of a save leaves the previous file intact; the next save to the same path
deletes the temporary files of killed saves. The header carries a SHA-256 checksum
(see `tensorfile`) that `load_state` verifies.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import sys
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from asgrad.nn.errors import (
    CheckpointIOError,
    CheckpointNotFoundError,
    InvalidStateError,
    StateMismatchError,
)
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.failures import io_error, translated
from asgrad.nn.serialization.locking import remove_if_abandoned, same_file, try_lock
from asgrad.nn.serialization.tensorfile import (
    RESERVED_KEYS,
    SUPPORTED,
    prepare,
    read_header,
    read_tensor_file,
    write_tensor_file,
)

__all__ = ["PathLike", "as_tensors", "check_state", "load_state", "read_metadata", "save_state"]

PathLike = str | os.PathLike[str]
_TEMP = re.compile(r"\.[a-z0-9_]{8}\.tmp")  # after ".<name>"


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_tensors(state: Mapping[Any, Any], what: str) -> dict[str, NDArray[Any]]:
    """``state`` as C-contiguous arrays that safetensors can store, checked.

    Keys must be non-empty strings that a safetensors reader accepts: valid UTF-8 and
    not ``"__metadata__"`` (the header's metadata entry).
    """
    out: dict[str, NDArray[Any]] = {}
    for key, value in state.items():
        if not isinstance(key, str) or not key:
            raise InvalidStateError(f"{what}: keys must be non-empty strings, got {key!r}")
        if key == "__metadata__":
            raise InvalidStateError(
                f"{what}: the key '__metadata__' is reserved by the safetensors format "
                "for the file's metadata, so no reader would load the file; rename the "
                "tensor (and pass text as metadata= instead)"
            )
        if not _utf8(key):
            raise InvalidStateError(
                f"{what}: key {key!r} is not valid UTF-8 (it holds a lone surrogate), "
                "which safetensors readers reject; rename the tensor"
            )
        array = np.asarray(value)
        if array.dtype not in SUPPORTED:
            names = ", ".join(sorted(str(d) for d in SUPPORTED))
            raise InvalidStateError(
                f"{what}: tensor {key!r} has dtype {array.dtype}, which safetensors "
                f"cannot store; convert it to one of: {names}"
            )
        # Not np.ascontiguousarray: it turns 0-d arrays into shape (1,).
        out[key] = array if array.flags.c_contiguous else array.copy(order="C")
    return out


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    meta = dict(metadata or {})
    pairs: list[tuple[object, object]] = list(meta.items())
    for k, v in pairs:
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidStateError(
                f"save_state: metadata must map str to str, got {k!r}: {v!r}; "
                "use json.dumps for structured values"
            )
        if k in RESERVED_KEYS:
            raise InvalidStateError(
                f"save_state: metadata key {k!r} is reserved (asgrad stores the file's "
                "checksum under it); rename it"
            )
        if not (_utf8(k) and _utf8(v)):
            raise InvalidStateError(
                f"save_state: metadata {k!r}: {v!r} is not valid UTF-8 (a lone "
                "surrogate), which safetensors readers reject"
            )
    return meta


def _new_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new, locked temporary file ``.<name>.<8 hex>.tmp`` in ``folder``."""
    for _ in range(100):
        tmp = folder / f".{name}.{atomic.token()}.tmp"
        try:
            fd = atomic.open_new(tmp)
        except FileExistsError:
            continue
        if try_lock(fd) and same_file(fd, tmp):
            return fd, tmp
        os.close(fd)  # a cleanup deleted it before the lock was taken: next name
    raise CheckpointIOError(
        f"save_state: could not create a temporary file in {folder}", path=folder
    )


def remove_abandoned_temps(folder: Path, name: str) -> list[Path]:
    """Delete the temporary files that killed saves of ``folder / name`` left."""
    gone = []
    for entry in folder.iterdir():
        ours = entry.name.startswith(f".{name}.") and _TEMP.fullmatch(entry.name[len(name) + 1 :])
        if ours and remove_if_abandoned(entry):
            gone.append(entry)
    return gone


def save_state(
    path: PathLike,
    state: Mapping[str, Any],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write named arrays to a safetensors file, atomically; return the path.

    ``metadata`` is a flat ``str -> str`` mapping stored in the file header; the keys
    ``asgrad.sha256`` and ``asgrad.integrity`` are reserved for the checksum. Bad input
    raises [`InvalidStateError`][asgrad.nn.InvalidStateError] before anything is written; a
    refused write (disk full, read-only folder) raises
    [`CheckpointIOError`][asgrad.nn.CheckpointIOError] and leaves the previous file intact.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = f"{tmp}/s.safetensors"
        ...     p = save_state(path, {"b": np.zeros(3)}, metadata={"note": "hi"})
        ...     read_metadata(p)
        {'note': 'hi'}
    """
    target = Path(path)
    prepared = prepare(as_tensors(state, "save_state"), _check_metadata(metadata))
    folder, name = target.parent, target.name
    with translated("save_state: cannot write", target, "the previous file is unchanged"):
        if target.is_dir():
            raise CheckpointIOError(
                f"save_state: {target} is a folder; give the path of a file inside it, "
                f"such as {target / 'state.safetensors'}",
                path=target,
                errno=errno.EISDIR,
            )
        folder.mkdir(parents=True, exist_ok=True)
        remove_abandoned_temps(folder, name)
        fd, tmp = _new_temp(folder, name)
        try:
            write_tensor_file(fd, prepared)
            if sys.platform == "win32":  # an open file cannot be renamed there
                os.close(fd)
                fd = -1
            atomic.replace(tmp, target)  # the commit
        except BaseException:
            with suppress(OSError):
                atomic.unlink(tmp)
            raise
        finally:
            if fd >= 0:
                os.close(fd)
    try:
        atomic.fsync_dir(folder)
    except OSError as exc:
        after = "the new file is in place but may not survive a power loss"
        raise io_error(exc, "save_state: cannot flush the folder of", target, after) from exc
    return target


def load_state(path: PathLike) -> dict[str, NDArray[Any]]:
    """Read every tensor of a safetensors file (keys in sorted order).

    The checksum written by `save_state` is verified; files from other writers
    (or older asgrad) have none and load unverified. Raises
    [`CheckpointNotFoundError`][asgrad.nn.CheckpointNotFoundError] if there is no file,
    [`CheckpointCorruptError`][asgrad.nn.CheckpointCorruptError] if it is damaged or not
    safetensors, [`CheckpointIOError`][asgrad.nn.CheckpointIOError] if it cannot be read.
    """
    p = Path(path)
    with translated("load_state: cannot read", p, reading=True):
        if not p.exists():
            raise CheckpointNotFoundError(f"load_state: no file at {p}; check the path", path=p)
        if p.is_dir():
            raise CheckpointIOError(
                f"load_state: {p} is a folder, not a tensor file; a checkpoint folder "
                "loads with load_checkpoint",
                path=p,
                errno=errno.EISDIR,
            )
        return read_tensor_file(p)[0]


def read_metadata(path: PathLike) -> dict[str, str]:
    """The ``str -> str`` metadata stored in a safetensors file's header.

    Reads the header only, so the checksum is not verified (`load_state` does).
    """
    p = Path(path)
    with translated("read_metadata: cannot read", p, reading=True):
        if p.is_dir():
            raise CheckpointIOError(
                f"read_metadata: {p} is a folder, not a tensor file",
                path=p,
                errno=errno.EISDIR,
            )
        return read_header(p)


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
    """Raise one [`StateMismatchError`][asgrad.nn.StateMismatchError] listing every difference, or
    return.

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
