"""The commit protocol of a checkpoint folder, and the recovery after a crash.

The caller holds the parent folder's writer lock (see
`locking`). The new folder is assembled under
``.tmp-<name>-<8 hex>``, every file flushed, then renamed to ``<name>``: that rename is
the commit. An existing ``<name>`` is first renamed to ``.old-<name>`` and deleted only
after the commit; `recover` finishes or undoes whatever a killed writer left.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgrad.nn.errors import CheckpointError
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.failures import io_error
from asgrad.nn.serialization.meta import META_FILE, Default, meta_bytes
from asgrad.nn.serialization.tensorfile import Prepared, write_tensor_file

__all__ = ["Plan", "commit_checkpoint", "recover"]


@dataclass
class Plan:
    """A checked checkpoint, ready to write: its tensor files and its meta entries."""

    files: dict[str, Prepared]
    meta: dict[str, Any]
    default: Default  # json.dumps's hook for numpy values in ``meta``


def recover(parent: Path, names: str) -> list[Path]:
    """Finish or undo what killed writers left in ``parent``; return what was handled.

    ``names`` is a regular expression for the checkpoint names concerned. The caller
    holds ``parent``'s writer lock, so every leftover belongs to a dead writer:
    ``.old-<name>`` goes back to ``<name>`` if the replacement never landed (else it is
    deleted), and ``.tmp-<name>-*`` and ``.trash-<name>-*`` folders are deleted.
    """
    old = re.compile(rf"\.old-({names})")
    debris = re.compile(rf"\.tmp-(?:{names})-[a-z0-9_]{{8}}|\.trash-(?:{names})-\d+-\d+")
    handled = []
    for name in sorted(
        n for n in os.listdir(parent) if n.startswith((".old-", ".tmp-", ".trash-"))
    ):
        entry = parent / name
        match = old.fullmatch(name)
        if match and (entry / META_FILE).is_file():
            target = parent / match.group(1)
            if os.path.lexists(target):
                atomic.remove_tree(entry, match.group(1))
            else:
                atomic.rename(entry, target)
                atomic.fsync_dir(parent)
            handled.append(entry)
        elif debris.fullmatch(name) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            handled.append(entry)
    return handled


def _write_file(path: Path, prepared: Prepared | bytes) -> tuple[int, str | None]:
    fd = atomic.open_new(path)
    try:
        if isinstance(prepared, bytes):
            atomic.write(fd, prepared)
            atomic.fsync(fd)
            return len(prepared), None
        checksum = write_tensor_file(fd, prepared)
        return os.fstat(fd).st_size, checksum
    finally:
        os.close(fd)


def commit_checkpoint(target: Path, plan: Plan, overwrite: bool) -> Path:
    """Write ``plan`` as checkpoint folder ``target``; the caller holds the parent's lock."""
    parent, name = target.parent, target.name
    exists = os.path.lexists(target)
    if exists and not overwrite:
        raise CheckpointError(
            f"save_checkpoint: {target} already exists; pass overwrite=True to replace it",
            path=target,
        )
    if exists and not (
        target.is_dir() and ((target / META_FILE).is_file() or not any(target.iterdir()))
    ):
        raise CheckpointError(
            f"save_checkpoint: {target} exists and is not a checkpoint folder (no "
            f"{META_FILE}), so it is not replaced; remove it yourself or choose another path",
            path=target,
        )
    tmp, old = parent / f".tmp-{name}-{atomic.token()}", parent / f".old-{name}"
    moved = committed = False
    atomic.mkdir(tmp)
    try:
        sizes, sums = {}, {}
        for file, prepared in plan.files.items():
            sizes[file], sums[file] = _write_file(tmp / file, prepared)
        meta = {**plan.meta, "created": time.time(), "files": sizes, "sha256": sums}
        _write_file(tmp / META_FILE, meta_bytes(meta, plan.default))
        atomic.fsync_dir(tmp)
        if exists:
            atomic.rename(target, old)
            moved = True
            atomic.fsync_dir(parent)
        atomic.rename(tmp, target)  # the commit
        committed = True
        atomic.fsync_dir(parent)
    except BaseException as exc:
        if not committed:
            with suppress(OSError):
                if moved and not os.path.lexists(target):
                    atomic.rename(old, target)
            shutil.rmtree(tmp, ignore_errors=True)
        elif isinstance(exc, OSError):
            after = "the new checkpoint is in place but may not survive a power loss"
            raise io_error(
                exc, "save_checkpoint: cannot flush the folder of", target, after
            ) from exc
        raise
    if exists:
        with suppress(OSError):  # else the next writer deletes it
            atomic.remove_tree(old, name)
    return target
