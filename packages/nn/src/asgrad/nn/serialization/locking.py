"""Writer locks and the safe removal of what killed writers left behind.

A folder of checkpoints takes one writer at a time: the writer holds an exclusive lock
on the file ``.asgrad.lock`` in it (``flock`` on POSIX, ``msvcrt.locking`` on Windows)
for as long as it writes. The operating system drops the lock when the process ends,
however it ends, so a lock never goes stale and no lock file needs deleting. While it
holds the lock, a writer knows that every temporary folder in the folder belongs to a
dead writer and may be deleted.

A temporary file of `save_state` carries its own lock,
held by its writer, so the cleanup at the next save deletes only files whose writer has
died, never the file another live process is writing.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import weakref
from pathlib import Path

from asgrad.nn.errors import CheckpointLockedError
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.failures import translated

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl

__all__ = ["LOCK_FILE", "WriterLock", "remove_if_abandoned", "same_file", "try_lock"]

LOCK_FILE = ".asgrad.lock"
_INFO_SIZE = 1024  # bytes of the holder's description in the lock file


def try_lock(fd: int) -> bool:
    """Take an exclusive lock on open file ``fd`` without waiting; False if one is held.

    Two descriptors opened separately conflict even inside one process.
    """
    if sys.platform == "win32":
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def remove_if_abandoned(path: Path) -> bool:
    """Delete temporary file ``path`` if no live writer holds its lock; True if deleted."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False  # gone already, or not ours to open
    try:
        if not try_lock(fd) or not same_file(fd, path):
            return False
        if sys.platform == "win32":  # an open file cannot be deleted there
            os.close(fd)
            fd = -1
        atomic.unlink(path)
        return True
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 2 * _INFO_SIZE).decode("utf-8"))
        where = "this process" if info["pid"] == os.getpid() else f"pid {info['pid']}"
        return f"{where} on host {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that is just starting or did not say who it is"


_HELD: weakref.WeakSet[WriterLock] = weakref.WeakSet()


class WriterLock:
    """The exclusive right to write into one folder; `acquire` it, then release.

    A forked child does not inherit the right: the lock stays with the parent.
    """

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd = fd
        self._finalizer = weakref.finalize(self, os.close, fd)
        _HELD.add(self)

    @classmethod
    def acquire(cls, directory: Path, who: str) -> WriterLock:
        """Lock ``directory`` (which must exist) or raise
        [`CheckpointLockedError`][asgrad.nn.CheckpointLockedError]."""
        path = directory / LOCK_FILE
        writable = True
        with translated(f"{who}: cannot open the writer lock", path):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:
                # Another user's lock file in a folder this one may write: lock it
                # read-only (flock allows that), without saying who holds it.
                fd = os.open(path, os.O_RDONLY)
                writable = False
        try:
            if not try_lock(fd):
                raise CheckpointLockedError(
                    f"{who}: {directory} is being written by another writer "
                    f"({_holder(fd)}); a folder takes one writer at a time: wait for "
                    "it to finish, close() the other CheckpointManager (or let it go out "
                    "of scope), or write to another folder",
                    path=directory,
                )
            if writable:
                info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.ctime()}
                text = json.dumps(info).encode("utf-8")
                with translated(f"{who}: cannot write the writer lock", path):
                    # Overwritten in place, padded to a fixed size: no truncation,
                    # which costs a journal commit on some file systems.
                    atomic.write_at(fd, text.ljust(_INFO_SIZE), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, fd)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._finalizer.alive

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        self._finalizer()
        _HELD.discard(self)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _drop_inherited_locks() -> None:
    # The child's copy of the descriptor shares the parent's lock; closing it in the
    # child leaves the parent's lock in place, and the child must lock anew to write.
    for lock in list(_HELD):
        lock.release()


if sys.platform != "win32":
    os.register_at_fork(after_in_child=_drop_inherited_locks)
