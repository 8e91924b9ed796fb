"""Durable file-system primitives: every change a saver makes to the disk goes through here.

The savers call them through this module (``atomic.rename(...)``), so a test can
replace one to simulate a full disk or a crash at exactly that point; the
fault-injection tests count on every write, flush, rename and delete being one of
these calls.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from pathlib import Path

__all__ = [
    "CHUNK",
    "fsync",
    "fsync_dir",
    "mkdir",
    "open_new",
    "remove_tree",
    "rename",
    "replace",
    "token",
    "unlink",
    "write",
    "write_at",
]

CHUNK = 1 << 24  # bytes per write call: 16 MiB
_NEW_FILE = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def token() -> str:
    """Eight random lowercase hex digits for a temporary name."""
    return secrets.token_hex(4)


def open_new(path: Path) -> int:
    """Create file ``path``, which must not exist, for writing; return its descriptor."""
    return os.open(path, _NEW_FILE, 0o666)


def write(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` at the descriptor's current position."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view[:CHUNK])
        view = view[written:]


def write_at(fd: int, data: bytes, offset: int) -> None:
    """Overwrite ``len(data)`` bytes at ``offset``, then return to the end of the file."""
    os.lseek(fd, offset, os.SEEK_SET)
    write(fd, data)
    os.lseek(fd, 0, os.SEEK_END)


def fsync(fd: int) -> None:
    """Flush an open file's data to the disk."""
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make the creations and renames inside folder ``path`` durable.

    A no-op on Windows, which cannot open a folder to flush it.
    """
    if sys.platform == "win32":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mkdir(path: Path) -> None:
    """Create folder ``path`` (its parent must exist); the umask sets its mode."""
    os.mkdir(path, 0o777)


def rename(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, which must not exist (atomic on one file system)."""
    os.rename(src, dst)


def replace(src: Path, dst: Path) -> None:
    """Rename file ``src`` onto ``dst``, replacing it atomically."""
    os.replace(src, dst)


def unlink(path: Path) -> None:
    """Delete file ``path``."""
    os.unlink(path)


def remove_tree(path: Path, name: str | None = None) -> None:
    """Delete a folder so that no half-deleted copy is left under its name.

    The folder is first renamed to ``.trash-<name>-<pid>-<ns>`` (atomic; ``name``
    defaults to the folder's), and only then are its files deleted; a crash in between
    leaves only the hidden trash folder, which the next writer of the folder deletes.
    """
    trash = f".trash-{name or path.name}-{os.getpid()}-{time.monotonic_ns()}"
    doomed = path.with_name(trash)
    rename(path, doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)
