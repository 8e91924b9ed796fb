"""Read (and write) IDX files, the format of MNIST, and load an MNIST directory.

An IDX file is two zero bytes, a type code, the number of dimensions, each
dimension as a big-endian uint32, then the values in row-major order, big-endian
(http://yann.lecun.com/exdb/mnist/). Files may be gzip-compressed (``.gz``).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "a-idx2-ubyte"
>>> write_idx(path, np.arange(6, dtype=np.uint8).reshape(2, 3))
>>> read_idx(path).tolist()
[[0, 1, 2], [3, 4, 5]]
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

# Type code -> big-endian numpy dtype.
IDX_TYPES: dict[int, str] = {
    0x08: ">u1",
    0x09: ">i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}

# The four files of MNIST (and of Fashion-MNIST, which uses the same names).
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


class IDXError(ValueError):
    """A file that is not a well-formed IDX file, or an MNIST directory that lacks one."""


def _read_bytes(path: Path) -> bytes:
    with path.open("rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":  # gzip magic, whatever the file is called
        with gzip.open(path, "rb") as g:
            return g.read()
    return path.read_bytes()


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in the IDX file ``path`` (gzip-compressed or not), native byte order."""
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise IDXError(f"{path}: not an IDX file (the first two bytes must be zero)")
    code, ndim = raw[2], raw[3]
    if code not in IDX_TYPES:
        raise IDXError(f"{path}: unknown IDX type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IDXError(f"{path}: truncated header ({len(raw)} bytes for {ndim} dimensions)")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_TYPES[code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise IDXError(
            f"{path}: {len(raw)} bytes, but a {dtype.name} array of shape {list(shape)}"
            f" needs {expected}; the file is truncated or not IDX"
        )
    data = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when ``path`` ends in ``.gz``)."""
    path = Path(path)
    array = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in IDX_TYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise IDXError(f"IDX cannot hold {array.dtype}; use uint8, int8/16/32, float32/64")
    header = bytes([0, 0, codes[native], array.ndim])
    header += np.asarray(array.shape, dtype=">u4").tobytes()
    payload = header + array.astype(native.newbyteorder(">")).tobytes()
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as f:
            f.write(payload)
    else:
        path.write_bytes(payload)


def _find(directory: Path, stem: str) -> Path:
    # The canonical names, the .gz variants, and the dotted names of some mirrors
    # ("train-images.idx3-ubyte").
    dotted = stem.replace("-idx", ".idx")
    for name in (stem, stem + ".gz", dotted, dotted + ".gz"):
        if (directory / name).is_file():
            return directory / name
    raise IDXError(
        f"{directory} has no {stem} (nor {stem}.gz); an MNIST directory holds"
        f" {', '.join(MNIST_FILES.values())}"
    )


def load_mnist(
    directory: str | Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)`` from MNIST's four IDX files in ``directory``.

    Images are float32 in ``[0, 1]`` shaped ``(N, 1, H, W)``; labels are int64. The
    training and test files are MNIST's own split (different writers), disjoint by
    construction.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise IDXError(f"--data {directory}: not a directory")
    arrays = {key: read_idx(_find(directory, stem)) for key, stem in MNIST_FILES.items()}
    out = []
    for part in ("train", "test"):
        images, labels = arrays[f"{part}_images"], arrays[f"{part}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise IDXError(
                f"{directory}: {part} images {list(images.shape)} and labels"
                f" {list(labels.shape)} do not match (expected (N, H, W) and (N,))"
            )
        scale = 255.0 if images.dtype == np.uint8 else 1.0
        out.append((images.astype(np.float32) / scale)[:, None])
        out.append(labels.astype(np.int64))
    return out[0], out[1], out[2], out[3]
