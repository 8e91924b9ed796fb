"""Turning the operating system's errors into [`CheckpointError`][asgrad.nn.CheckpointError]
subclasses.

Every saver and loader runs its file-system calls inside `translated`, so an
``OSError`` (``IsADirectoryError``, ``PermissionError``, a full disk, ...) reaches the
user as a [`CheckpointIOError`][asgrad.nn.CheckpointIOError] (still an ``OSError``) or, for a
missing file on load, a [`CheckpointNotFoundError`][asgrad.nn.CheckpointNotFoundError], naming the
path and what to do; the original exception is kept as ``__cause__``.
"""

from __future__ import annotations

import errno as errnos
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from asgrad.nn.errors import CheckpointError, CheckpointIOError, CheckpointNotFoundError

__all__ = ["io_error", "translated"]

_HINTS = {
    errnos.ENOSPC: "the disk is full: free some space or save elsewhere, then retry",
    errnos.EDQUOT: "the disk quota is used up: free some space or save elsewhere",
    errnos.EROFS: "the file system is read-only: save to a writable folder",
    errnos.EACCES: "permission denied: make the folder writable or save elsewhere",
    errnos.EPERM: "operation not permitted: make the folder writable or save elsewhere",
    errnos.EISDIR: "a folder is in the way where a file belongs: choose another path",
    errnos.ENOTDIR: "a file is in the way where a folder belongs: choose another path",
    errnos.EEXIST: "something is in the way at that path: choose another path",
    errnos.ENOTEMPTY: "a folder is in the way at that path: choose another path",
    errnos.EFBIG: "the file outgrew the file-size limit (ulimit -f): raise it, then retry",
    errnos.ENAMETOOLONG: "the path is too long: choose a shorter one",
    errnos.EIO: "the device reported an I/O error: check the disk",
    errnos.ENOENT: "a folder on the way vanished: check the path, then retry",
}


def _where(exc: OSError, path: Path) -> str:
    """The file the call failed on, when it is not ``path`` itself."""
    return f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""


def io_error(exc: OSError, doing: str, path: Path, after: str = "") -> CheckpointError:
    """The [`CheckpointError`][asgrad.nn.CheckpointError] to raise for ``exc``, met while ``doing``
    ``path``.

    ``after`` says what state the failure left (e.g. "the previous file is unchanged").
    """
    code = exc.errno
    reason = exc.strerror or str(exc) or type(exc).__name__
    hint = _HINTS.get(code or -1, "check the path and the disk, then retry")
    message = f"{doing} {path}: {reason}{_where(exc, path)}; {hint}"
    if after:
        message += f"; {after}"
    return CheckpointIOError(message, path=path, errno=code)


@contextmanager
def translated(doing: str, path: Path, after: str = "", *, reading: bool = False) -> Iterator[None]:
    """Re-raise an ``OSError`` from the block as a [`CheckpointError`][asgrad.nn.CheckpointError]
    subclass.

    With ``reading``, a missing file becomes
    [`CheckpointNotFoundError`][asgrad.nn.CheckpointNotFoundError]. Errors that already are
    [`CheckpointError`][asgrad.nn.CheckpointError] pass through unchanged.
    """
    try:
        yield
    except CheckpointError:
        raise
    except FileNotFoundError as exc:
        if reading:
            raise CheckpointNotFoundError(
                f"{doing} {path}: no such file or folder{_where(exc, path)}; check the "
                "path, or, if it was just there, retry: a writer may have replaced or "
                "rotated it",
                path=path,
            ) from exc
        raise io_error(exc, doing, path, after) from exc
    except OSError as exc:
        raise io_error(exc, doing, path, after) from exc
