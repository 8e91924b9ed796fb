"""Durable file-system primitives: flush a file or a folder, delete a folder atomically.

The savers call them through this module (``atomic.fsync_file(...)``), so a test can
replace one to simulate a failing disk or a crash at that point.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

__all__ = ["fsync_dir", "fsync_file", "remove_tree"]


def fsync_file(path: Path) -> None:
    """Flush a written file's data to the disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """Make the renames inside folder ``path`` durable (a no-op on Windows).

    Windows cannot open a folder to flush it.
    """
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete a folder so that no half-deleted copy is left under its name."""
    doomed = path.with_name(f".trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(path, doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)
