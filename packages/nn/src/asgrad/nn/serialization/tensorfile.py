"""The safetensors format, written and read with a SHA-256 checksum in one pass.

A file is standard safetensors (https://github.com/huggingface/safetensors): an 8-byte
little-endian header length, a JSON header, then the tensors' bytes. asgrad writes it
itself, streaming each array to the disk without a copy, and puts two entries first in
the header's ``__metadata__``:

* ``asgrad.sha256``: the SHA-256 of the whole file as it would read with these 64 hex
  digits replaced by ``0``s;
* ``asgrad.integrity``: ``"sha256"``, a second marker, so that no single damaged byte
  can make a checksummed file pass for an old one without a checksum.

Reading checks the header as strictly as the safetensors library does (byte ranges
contiguous, sizes matching shapes, nothing missing or extra), reads every tensor
straight into its array and verifies the checksum over the very bytes it read. Files
without the two entries (from other writers, or older asgrad) load unverified.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy
from numpy.typing import NDArray

from asgrad.nn.errors import CheckpointCorruptError, InvalidStateError
from asgrad.nn.serialization import atomic

__all__ = [
    "INTEGRITY_KEY",
    "MAX_HEADER",
    "RESERVED_KEYS",
    "SHA_KEY",
    "SUPPORTED",
    "Prepared",
    "prepare",
    "read_header",
    "read_tensor_file",
    "write_tensor_file",
]

SHA_KEY = "asgrad.sha256"
INTEGRITY_KEY = "asgrad.integrity"
RESERVED_KEYS = (SHA_KEY, INTEGRITY_KEY)
MAX_HEADER = 100_000_000  # the safetensors library refuses larger headers
_CODE = {np.dtype(t): code for code, t in safetensors.numpy._TYPES.items()}
_DTYPE = {code: dtype for dtype, code in _CODE.items()}
SUPPORTED = frozenset(_CODE)
_PREFIX = b'{"__metadata__":{"asgrad.sha256":"'
_SUM_AT = 8 + len(_PREFIX)  # file offset of the 64 hex digits
_ZEROS = b"0" * 64


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


Prepared = tuple[bytes, list[NDArray[Any]]]


def prepare(tensors: Mapping[str, NDArray[Any]], metadata: Mapping[str, str]) -> Prepared:
    """The header and the arrays in file order; raises if the header is too large.

    ``tensors`` hold C-contiguous arrays of supported dtypes (see ``as_tensors``);
    ``metadata`` keys must not be reserved.
    """
    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    parts = [_PREFIX.decode(), _ZEROS.decode(), f'",{_dumps(INTEGRITY_KEY)}:"sha256"']
    parts += [f",{_dumps(k)}:{_dumps(v)}" for k, v in metadata.items()]
    parts.append("}")
    offset = 0
    for name in order:
        array = tensors[name]
        spec = {
            "dtype": _CODE[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        parts.append(f",{_dumps(name)}:{json.dumps(spec, separators=(',', ':'))}")
        offset += array.nbytes
    parts.append("}")
    header = "".join(parts).encode("utf-8")
    header += b" " * (-len(header) % 8)  # 8-byte alignment for the tensors, as upstream
    if len(header) > MAX_HEADER:
        raise InvalidStateError(
            f"the header (names, shapes, metadata) takes {len(header):,} bytes, over the "
            f"{MAX_HEADER:,} that safetensors readers accept; use fewer or shorter names, "
            "or split the state into several files"
        )
    return struct.pack("<Q", len(header)) + header, [tensors[k] for k in order]


def _bytes_of(array: NDArray[Any]) -> memoryview:
    """The array's memory as a writable flat byte view (C-contiguous arrays only)."""
    return array.reshape(-1).view(np.uint8).data


def write_tensor_file(fd: int, prepared: Prepared) -> str:
    """Write a file made by `prepare` to new file ``fd``; flush it to the disk.

    Returns the checksum stored in the header.
    """
    head, arrays = prepared
    digest = hashlib.sha256(head)
    atomic.write(fd, head)
    # Each chunk is copied once, so the bytes hashed are the bytes written even if
    # another thread changes an array meanwhile (the file is then a torn snapshot
    # but a valid one), and hashed while they are in the CPU cache.
    buffer = memoryview(bytearray(min(atomic.CHUNK, max((a.nbytes for a in arrays), default=0))))
    for array in arrays:
        data = _bytes_of(array)
        for start in range(0, len(data), atomic.CHUNK):
            chunk = buffer[: min(atomic.CHUNK, len(data) - start)]
            chunk[:] = data[start : start + len(chunk)]
            digest.update(chunk)
            atomic.write(fd, chunk)
    checksum = digest.hexdigest()
    atomic.write_at(fd, checksum.encode("ascii"), _SUM_AT)
    atomic.fsync(fd)
    return checksum


def _corrupt(path: Path, what: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(
        f"{path} is truncated, damaged or not a safetensors file: {what}; if asgrad "
        "wrote it, it changed afterwards (disk or copy error, another program). Load "
        "another copy or an older checkpoint",
        path=path,
    )


def _read_exact(f: Any, size: int, path: Path) -> bytes:
    data: bytes = f.read(size)
    if len(data) != size:
        raise _corrupt(path, f"it ends {size - len(data)} bytes early")
    return data


def _parse_header(f: Any, path: Path, file_size: int) -> tuple[bytes, dict[str, Any]]:
    """The raw header (length prefix included) and the parsed JSON header."""
    if file_size < 8:
        raise _corrupt(path, f"{file_size} bytes is too short for a safetensors file")
    prefix = _read_exact(f, 8, path)
    (size,) = struct.unpack("<Q", prefix)
    if size > MAX_HEADER or 8 + size > file_size:
        raise _corrupt(path, f"the header length {size:,} does not fit the file")
    raw = _read_exact(f, size, path)
    if not raw.startswith(b"{"):
        raise _corrupt(path, "its header does not start with '{'")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _corrupt(path, f"its header is not valid JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise _corrupt(path, "its header is not a JSON object")
    return prefix + raw, header


def _metadata(header: dict[str, Any], path: Path) -> dict[str, str] | None:
    meta = header.pop("__metadata__", None)
    if meta is not None and not (
        isinstance(meta, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    ):
        raise _corrupt(path, "its __metadata__ is not a str -> str mapping")
    return meta


def _layout(
    header: dict[str, Any], path: Path, data_size: int
) -> list[tuple[str, np.dtype[Any], tuple[int, ...]]]:
    """Tensor name, dtype and shape in file order, checked like the safetensors library."""
    entries = []
    for name, spec in header.items():
        ok = isinstance(spec, dict) and {"dtype", "shape", "data_offsets"} <= spec.keys()
        shape = spec.get("shape") if ok else None
        offsets = spec.get("data_offsets") if ok else None
        ints = [*(shape or []), *(offsets or [])]
        if not (
            isinstance(shape, list)
            and isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(i) is int and i >= 0 for i in ints)
        ):
            raise _corrupt(path, f"tensor {name!r} has a malformed entry in the header")
        dtype = _DTYPE.get(spec["dtype"])
        if dtype is None:
            raise CheckpointCorruptError(
                f"{path}: tensor {name!r} has dtype {spec['dtype']!r}, which numpy cannot "
                f"hold (numpy dtypes: {', '.join(sorted(_DTYPE))}); convert the file with "
                "a framework that has that dtype",
                path=path,
            )
        if math.prod(shape) * dtype.itemsize != offsets[1] - offsets[0]:
            raise _corrupt(path, f"tensor {name!r}: its byte range does not match its shape")
        entries.append((offsets[0], offsets[1], name, dtype, tuple(shape)))
    entries.sort(key=lambda e: (e[0], e[1]))
    end = 0
    for begin, stop, name, _, _ in entries:
        if begin != end:
            raise _corrupt(path, f"tensor {name!r} does not start where the previous ends")
        end = stop
    if end != data_size:
        raise _corrupt(path, f"the tensors take {end:,} bytes but the file holds {data_size:,}")
    return [(name, dtype, shape) for _, _, name, dtype, shape in entries]


def read_tensor_file(path: Path) -> tuple[dict[str, NDArray[Any]], dict[str, str], str | None]:
    """Tensors (sorted by name), user metadata and verified checksum (None: unverified).

    Raises [`CheckpointCorruptError`][asgrad.nn.CheckpointCorruptError] for a damaged file;
    ``OSError`` passes through.
    """
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        raw, header = _parse_header(f, path, file_size)
        meta = _metadata(header, path) or {}
        checksum: str | None = None
        if SHA_KEY in meta or INTEGRITY_KEY in meta:
            checksum = raw[_SUM_AT : _SUM_AT + 64].decode("ascii", "replace")
            if (
                not raw.startswith(_PREFIX, 8)
                or meta.get(SHA_KEY) != checksum
                or meta.get(INTEGRITY_KEY) != "sha256"
            ):
                raise _corrupt(path, "its checksum entry in the header is damaged")
        layout = _layout(header, path, file_size - len(raw))
        zeroed = raw[:_SUM_AT] + _ZEROS + raw[_SUM_AT + 64 :]
        digest = hashlib.sha256(zeroed) if checksum else None
        tensors: dict[str, NDArray[Any]] = {}
        for name, dtype, shape in layout:
            array = np.empty(shape, dtype)
            data = _bytes_of(array)
            for start in range(0, len(data), atomic.CHUNK):
                chunk = data[start : start + atomic.CHUNK]
                if f.readinto(chunk) != len(chunk):
                    raise _corrupt(path, f"it ends inside tensor {name!r}")
                if digest is not None:
                    digest.update(chunk)  # while the chunk is in the CPU cache
            tensors[name] = array
        actual = None if digest is None else digest.hexdigest()
        if actual != checksum:
            raise CheckpointCorruptError(
                f"{path} failed its checksum (SHA-256 {actual}, the header says "
                f"{checksum}): it changed after it was written (disk or copy error, "
                "another program). Load another copy or an older checkpoint",
                path=path,
            )
    user = {k: v for k, v in meta.items() if k not in RESERVED_KEYS}
    return dict(sorted(tensors.items())), user, checksum


def read_header(path: Path) -> dict[str, str]:
    """The user metadata of a safetensors file, from its header only (not verified)."""
    with open(path, "rb") as f:
        _, header = _parse_header(f, path, os.fstat(f.fileno()).st_size)
    meta = _metadata(header, path) or {}
    return {k: v for k, v in meta.items() if k not in RESERVED_KEYS}
