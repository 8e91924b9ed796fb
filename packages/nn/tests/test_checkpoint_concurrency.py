"""Concurrent writers and readers: the writer lock, and no lost or torn checkpoint.

A folder of checkpoints takes one writer at a time: a second one, in the same process
or another, gets :class:`CheckpointLockedError` naming the holder, and nothing of the
first one's work is touched. Readers need no lock and never see a torn checkpoint.
Other processes are forked children (``os.fork`` after the imports).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from asgrad.nn.serialization import (
    CheckpointLockedError,
    CheckpointManager,
    load_checkpoint,
    load_state,
    save_checkpoint,
    save_state,
)
from asgrad.nn.serialization.locking import LOCK_FILE, try_lock

# The conftest fixture: runs a function in a forked child, returns (pid, read fd).
Fork = Callable[[Callable[[int], None]], tuple[int, int]]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

N = 1 << 14


def state(v: int) -> dict[str, np.ndarray]:
    return {"w": np.full(N, v, np.float32), "b": np.full(3, v, np.int64)}


def version(loaded: dict[str, np.ndarray]) -> int:
    v = int(loaded["b"][0])
    assert np.all(loaded["w"] == v)
    assert np.all(loaded["b"] == v)
    assert loaded["w"].shape == (N,)
    return v


def debris(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != LOCK_FILE
    )


def finish(pid: int, fd: int, *, kill: bool = False) -> bytes:
    """Stop (SIGKILL) or wait for the child; return what it wrote on the pipe."""
    if kill:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not kill:
        assert os.WIFEXITED(status), "child killed"
        assert os.WEXITSTATUS(status) == 0, "child failed (see its traceback above)"
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def test_second_manager_in_one_process_gets_a_clear_error(tmp_path: Path) -> None:
    first = CheckpointManager(tmp_path, keep_last=None)
    first.save(1, state(1))
    second = CheckpointManager(tmp_path, keep_last=None)
    with pytest.raises(CheckpointLockedError, match="being written by another writer") as info:
        second.save(2, state(2))
    text = str(info.value)
    assert "this process" in text
    assert "close()" in text
    assert info.value.path == tmp_path
    with pytest.raises(CheckpointLockedError):
        save_checkpoint(tmp_path / "ckpt-000000003", state(3), step=3)
    with pytest.raises(CheckpointLockedError):
        second.cleanup()
    assert second.steps() == [1]  # reading needs no lock
    assert version(second.load().model_state) == 1
    first.close()
    second.save(2, state(2))  # the lock is free now
    assert second.steps() == [1, 2]
    with pytest.raises(CheckpointLockedError):
        first.save(3, state(3))
    second.close()
    with CheckpointManager(tmp_path, keep_last=None) as third:
        third.save(3, state(3))
    # A manager that goes out of scope gives the lock up too.
    fourth = CheckpointManager(tmp_path, keep_last=None)
    fourth.save(4, state(4))
    del fourth
    CheckpointManager(tmp_path, keep_last=None).save(5, state(5))
    assert CheckpointManager(tmp_path).steps() == [1, 2, 3, 4, 5]


def test_threads_of_one_manager_take_turns(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_last=3)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for step in range(offset, offset + 20):
                mgr.save(step, state(step))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 100,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert mgr.steps() == [117, 118, 119]
    for step in mgr.steps():
        assert version(mgr.load(step).model_state) == step
    assert debris(tmp_path) == []


def test_second_writer_process_is_refused_until_the_first_dies(tmp_path: Path, fork: Fork) -> None:
    """The issue's two writers: now the second gets an error naming the first."""

    def writer(fd: int) -> None:
        mgr = CheckpointManager(tmp_path, keep_last=2)
        for step in range(1, 100_000):
            mgr.save(step, state(step), metrics={"val_loss": 1 / step})
            if step == 1:
                os.write(fd, b"1")

    pid, fd = fork(writer)
    assert os.read(fd, 1) == b"1"  # the child holds the lock and keeps saving
    mine = CheckpointManager(tmp_path, keep_last=2)
    with pytest.raises(CheckpointLockedError, match=f"pid {pid} on host"):
        mine.save(10**6, state(0))
    with pytest.raises(CheckpointLockedError):
        save_checkpoint(tmp_path / "other", state(0), step=0)
    # Meanwhile readers load whole checkpoints while the writer saves and rotates.
    for _ in range(30):
        data = mine.load()
        assert version(data.model_state) == data.step
        time.sleep(0.001)
    finish(pid, fd, kill=True)  # the kernel drops a dead process's lock
    mine.save(10**6, state(7))  # the next writer gets it and repairs the folder
    assert debris(tmp_path) == []
    steps = mine.steps()
    assert steps[-1] == 10**6
    for step in steps[:-1]:
        assert version(mine.load(step).model_state) == step


def test_a_forked_child_does_not_inherit_the_lock(tmp_path: Path, fork: Fork) -> None:
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, state(1))

    def child(fd: int) -> None:
        try:
            mgr.save(2, state(2))
        except CheckpointLockedError as exc:
            os.write(fd, str(exc).encode())

    pid, fd = fork(child)
    message = finish(pid, fd).decode()
    assert f"pid {os.getpid()}" in message
    mgr.save(3, state(3))  # the parent still holds it after the child exited
    assert mgr.steps() == [1, 3]


def test_two_processes_saving_one_file_with_a_reader(tmp_path: Path, fork: Fork) -> None:
    """save_state needs no lock: writers replace the file in turn, readers see whole files,
    and neither writer deletes the other's temporary file while it is being written.
    """
    target = tmp_path / "w.safetensors"
    save_state(target, state(0))

    def writer(first: int) -> Callable[[int], None]:
        def body(fd: int) -> None:
            for v in range(first, first + 60):
                save_state(target, state(v))

        return body

    def reader(fd: int) -> None:
        seen = set()
        for _ in range(300):
            seen.add(version(load_state(target)))
        os.write(fd, str(len(seen)).encode())

    children = [fork(writer(1000)), fork(writer(2000)), fork(reader)]
    outputs = [finish(pid, fd) for pid, fd in children]
    assert int(outputs[2]) >= 1
    assert version(load_state(target)) in (1059, 2059)
    assert debris(tmp_path) == []


def test_killed_writers_temporary_file_is_removed_by_the_next_save(tmp_path: Path) -> None:
    target = tmp_path / "w.safetensors"
    save_state(target, state(0))
    # A killed save's temporary file (no process holds its lock any more)...
    stale = tmp_path / ".w.safetensors.0a1b2c3d.tmp"
    stale.write_bytes(b"half a file")
    # ...and one of a live writer (this process holds its lock) look the same.
    live = tmp_path / ".w.safetensors.9f8e7d6c.tmp"
    live.write_bytes(b"being written")
    other = tmp_path / "keep.0a1b2c3d.tmp"  # not a temporary name of this target
    other.write_bytes(b"x")
    fd = os.open(live, os.O_RDWR)
    try:
        assert try_lock(fd)
        save_state(target, state(1))
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            ".w.safetensors.9f8e7d6c.tmp",
            "keep.0a1b2c3d.tmp",
            "w.safetensors",
        ]
    finally:
        os.close(fd)
    save_state(target, state(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.0a1b2c3d.tmp", "w.safetensors"]
    assert version(load_state(target)) == 2


def test_killed_checkpoint_writer_leftovers_go_at_the_next_start(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_last=None)
    mgr.save(1, state(1))
    mgr.save(2, state(2))
    mgr.close()
    # What killed writers leave: a half-written folder, a folder being deleted, and a
    # checkpoint renamed away just before its replacement was renamed into place.
    (tmp_path / ".tmp-ckpt-000000003-0a1b2c3d").mkdir()
    (tmp_path / ".trash-ckpt-000000001-123-456").mkdir()
    (tmp_path / "ckpt-000000002").rename(tmp_path / ".old-ckpt-000000002")
    reader = CheckpointManager(tmp_path)
    assert reader.steps() == [1, 2]  # step 2 is found under its .old- name
    assert version(reader.load().model_state) == 2
    assert version(load_checkpoint(tmp_path / "ckpt-000000002").model_state) == 2
    assert len(debris(tmp_path)) == 3  # readers change nothing
    writer = CheckpointManager(tmp_path, keep_last=None)
    assert sorted(p.name for p in writer.cleanup()) == [
        ".old-ckpt-000000002",
        ".tmp-ckpt-000000003-0a1b2c3d",
        ".trash-ckpt-000000001-123-456",
    ]
    assert debris(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        LOCK_FILE,
        "ckpt-000000001",
        "ckpt-000000002",
    ]
    assert version(writer.load(2).model_state) == 2


def test_another_users_lock_file_does_not_block_a_permitted_writer(
    tmp_path: Path, fork: Fork
) -> None:
    """A shared folder: the lock file belongs to someone else and is read-only to us."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    base = Path(tempfile.mkdtemp()) if root else tmp_path
    try:
        base.chmod(0o755)
        folder = base / "shared"
        folder.mkdir()
        CheckpointManager(folder).save(1, state(1))
        (folder / LOCK_FILE).chmod(0o444)
        folder.chmod(0o777)

        def writer(fd: int) -> None:
            if root:
                os.setgid(65534)
                os.setuid(65534)
            with CheckpointManager(folder) as mgr:
                mgr.save(2, state(2))
            os.write(fd, b"saved")

        pid, fd = fork(writer)
        assert finish(pid, fd) == b"saved"
        assert CheckpointManager(folder).steps() == [1, 2]
    finally:
        if root:
            shutil.rmtree(base)


def test_latest_is_listed_again_when_a_rotation_deleted_what_a_listing_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer rotating faster than a reader lists can delete every folder the listing
    saw before it is read: the listing finds no complete checkpoint though the folder
    holds newer ones. The load lists again instead of reporting none."""
    mgr = CheckpointManager(tmp_path, keep_last=2)
    mgr.save(1, state(1))
    mgr.save(2, state(2))
    listed = CheckpointManager._complete
    calls = [0]

    def racing(self: CheckpointManager) -> dict[int, Path]:
        calls[0] += 1
        return {} if calls[0] <= 2 else listed(self)  # the first two listings lost the race

    monkeypatch.setattr(CheckpointManager, "_complete", racing)
    assert version(CheckpointManager(tmp_path).load().model_state) == 2
    assert calls[0] == 3
