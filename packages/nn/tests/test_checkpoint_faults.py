"""Fault injection: saves killed, starved of disk and refused, in every save mode.

Modes: ``save_state``, ``save_checkpoint`` of new folders, ``save_checkpoint`` with
``overwrite=True``, ``CheckpointManager.save`` (rotating the previous step away) and
``CheckpointManager.save`` of a step that exists. A forked child (``os.fork`` after
the imports, so it starts in milliseconds) saves, and is killed with SIGKILL either
right after its k-th call of an :mod:`asgrad.nn.serialization.atomic` primitive (a
sweep over every step of a save) or by the parent after a random delay from a seeded
generator (``slow``: 100 kills per mode, counting how many landed mid-save so that the
test cannot pass vacuously). After every kill, every checkpoint whose save returned
loads intact, the one being saved is either the old or the new version, nothing
unloadable is visible, and the next writer removes what the killed one left. Then the
disk fills up at every step (ENOSPC), files hit a size limit mid-write
(RLIMIT_FSIZE), and the folder is read-only. Concurrent writers are in
``test_checkpoint_concurrency.py``.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if sys.platform != "win32":
    import resource

from asgrad.nn.serialization import (
    CheckpointData,
    CheckpointIOError,
    CheckpointManager,
    atomic,
    load_checkpoint,
    load_state,
    save_checkpoint,
    save_state,
)
from asgrad.nn.serialization.locking import LOCK_FILE

# The conftest fixture: runs a function in a forked child, returns (pid, read fd).
Fork = Callable[[Callable[[int], None]], tuple[int, int]]

# The checkpoint kill suite: several minutes of forked savers killed mid-write, so it is
# marked slow (CI runs it; `hatch run test` leaves it out, `hatch run test-all` runs it).
pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork and SIGKILL"),
    pytest.mark.slow,
]

N = 1 << 16  # float32 elements of the big tensors: 256 KiB each
PRIMITIVES = ("open_new", "write", "write_at", "fsync", "fsync_dir", "mkdir", "rename", "replace")
PRIMITIVES += ("unlink",)


def model(v: int) -> dict[str, np.ndarray]:
    return {"w": np.full(N, v, np.float32), "b": np.full(7, v, np.float32)}


def optim(v: int) -> dict[str, Any]:
    return {"m.w": np.full(N, -v, np.float32), "t": v}


def state_version(path: Path) -> int:
    state = load_state(path)
    v = int(state["b"][0])
    assert state.keys() == {"b", "w"}
    assert state["w"].shape == (N,)
    assert np.all(state["w"] == v)
    assert np.all(state["b"] == v)
    return v


def ckpt_version(data: CheckpointData) -> int:
    v = int(data.model_state["b"][0])
    assert data.verified
    assert data.model_state["w"].shape == (N,)
    assert np.all(data.model_state["w"] == v)
    assert np.all(data.model_state["b"] == v)
    assert data.optimizer_state is not None
    assert np.all(data.optimizer_state["m.w"] == -v)
    assert data.optimizer_state["t"] == v
    assert data.metrics == {"val_loss": 1.0 / (v + 1)}
    return v


def debris(folder: Path) -> list[str]:
    """What killed saves left: hidden names other than the lock file."""
    return sorted(
        p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != LOCK_FILE
    )


@dataclass
class Mode:
    """One way of saving: ``save(folder, v)`` writes version ``v``."""

    save: Callable[[Path, int], None]
    #: The invariants after a kill, given the last version whose save returned;
    #: returns the version now visible of what was being saved.
    check: Callable[[Path, int], int]
    #: A saver of successive versions that keeps its state (a manager) between saves.
    session: Callable[[Path], Callable[[int], None]] | None = None

    def saver(self, folder: Path) -> Callable[[int], None]:
        if self.session is not None:
            return self.session(folder)
        return lambda v: self.save(folder, v)


def _state_check(folder: Path, acked: int) -> int:
    v = state_version(folder / "w.safetensors")
    assert v in (acked, acked + 1)
    return v


def _new_check(folder: Path, acked: int) -> int:
    # The acknowledged folder is whole, and so is any other near it; the one in
    # flight is whole or absent.
    assert ckpt_version(load_checkpoint(folder / f"c-{acked}")) == acked
    for v in range(max(0, acked - 3), acked):
        if (folder / f"c-{v}").exists():
            assert ckpt_version(load_checkpoint(folder / f"c-{v}")) == v
    assert not (folder / f"c-{acked + 2}").exists()
    if (folder / f"c-{acked + 1}").exists():
        assert ckpt_version(load_checkpoint(folder / f"c-{acked + 1}")) == acked + 1
        return acked + 1
    return acked


def _overwrite_check(folder: Path, acked: int) -> int:
    v = ckpt_version(load_checkpoint(folder / "c"))
    assert v in (acked, acked + 1)
    return v


def _manager_check(folder: Path, acked: int, keep_last: int) -> int:
    mgr = CheckpointManager(folder, keep_last=keep_last)
    steps = mgr.steps()
    assert steps, "no checkpoint left"
    assert steps[-1] in (acked, acked + 1)
    if keep_last >= 2:
        assert acked in steps
    for step in steps:
        assert ckpt_version(mgr.load(step)) == step
    assert mgr.latest() == mgr.best() == mgr.path_for(steps[-1])  # val_loss falls
    return steps[-1]


def _resave_check(folder: Path, acked: int) -> int:
    mgr = CheckpointManager(folder)
    assert mgr.steps() == [7]
    data = mgr.load(7)
    v = int(data.model_state["b"][0])
    data.step = v  # the version, for ckpt_version's checks
    assert ckpt_version(data) in (acked, acked + 1)
    return v


def _manager_save(folder: Path, v: int, keep_last: int, step: int | None = None) -> None:
    with CheckpointManager(folder, keep_last=keep_last) as mgr:
        metrics = {"val_loss": 1 / (v + 1)}
        mgr.save(v if step is None else step, model(v), optim(v), metrics=metrics)


def _manager_session(
    folder: Path, keep_last: int, step: int | None = None
) -> Callable[[int], None]:
    """One manager saving version after version, as a training loop does."""
    mgr = CheckpointManager(folder, keep_last=keep_last)

    def save(v: int) -> None:
        metrics = {"val_loss": 1 / (v + 1)}
        mgr.save(v if step is None else step, model(v), optim(v), metrics=metrics)

    return save


def _ckpt_save(path: Path, v: int, overwrite: bool) -> None:
    metrics = {"val_loss": 1 / (v + 1)}
    opt = optim(v)
    save_checkpoint(
        path, model(v), step=v, optimizer_state=opt, metrics=metrics, overwrite=overwrite
    )


MODES = {
    "save_state": Mode(lambda d, v: save_state(d / "w.safetensors", model(v)), _state_check),
    "save_checkpoint": Mode(lambda d, v: _ckpt_save(d / f"c-{v}", v, False), _new_check),
    "overwrite": Mode(lambda d, v: _ckpt_save(d / "c", v, True), _overwrite_check),
    # keep_last=1: the save of step v deletes step v - 1, so kills land in rotation too.
    "manager": Mode(
        lambda d, v: _manager_save(d, v, keep_last=1),
        lambda d, a: _manager_check(d, a, keep_last=1),
        lambda d: _manager_session(d, keep_last=1),
    ),
    "manager_resave": Mode(
        lambda d, v: _manager_save(d, v, 2, step=7),
        _resave_check,
        lambda d: _manager_session(d, 2, step=7),
    ),
}


def reap(pid: int) -> bool:
    """Wait for the child; True if SIGKILL ended it, False if it exited 0."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, "the child failed (its traceback is above)"
    return False


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def kill_after(k: int) -> None:
    """In the child: SIGKILL this process right after the k-th primitive call."""
    calls = [0]
    for name in PRIMITIVES:
        real = getattr(atomic, name)

        def counted(*args: Any, _real: Callable[..., Any] = real) -> Any:
            result = _real(*args)
            calls[0] += 1
            if calls[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        setattr(atomic, name, counted)


@pytest.fixture
def no_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``fsync`` a no-op (still a counted primitive call) for speed.

    A SIGKILL cannot undo what reached the page cache, so flushing changes nothing a
    kill can observe (it matters for power loss); the other tests flush for real.
    """
    monkeypatch.setattr(atomic, "fsync", lambda fd: None)
    monkeypatch.setattr(atomic, "fsync_dir", lambda path: None)


@pytest.mark.usefixtures("no_flush")
@pytest.mark.parametrize("name", sorted(MODES))
def test_kill_after_every_step_of_a_save(tmp_path: Path, name: str, fork: Fork) -> None:
    """Kill right after the 1st, 2nd, ... file-system call, until the save completes."""
    mode = MODES[name]
    seen: set[str] = set()
    k = 0
    while True:
        k += 1
        folder = tmp_path / str(k)
        folder.mkdir()
        mode.save(folder, 0)

        def save_one(_: int, k: int = k, folder: Path = folder) -> None:
            kill_after(k)
            mode.save(folder, 1)

        pid, fd = fork(save_one)
        killed = reap(pid)
        read_all(fd)
        if not killed:  # k is past the last call: the sweep is complete
            break
        left = debris(folder)
        if name == "overwrite" and not (folder / "c").exists():
            seen.add("between the renames")  # load_checkpoint reads .old-c then
        visible = mode.check(folder, 0)
        seen.add(f"{'new' if visible == 1 else 'old'}{' + debris' if left else ''}")
        # The next save (the next start) repairs everything and leaves no debris.
        mode.save(folder, 2)
        assert debris(folder) == []
        assert mode.check(folder, 2) == 2
    assert k - 1 >= (6 if name == "save_state" else 12), f"only {k - 1} kill points"
    assert "old + debris" in seen, seen
    assert any(s.startswith("new") for s in seen), seen
    if name == "overwrite":
        assert "between the renames" in seen


KILLS = 100  # per mode
SEED = 20240610


def _events(data: bytes) -> list[int]:
    return [v for (v,) in struct.iter_unpack("<i", data)]


READY = -1


def _save_forever(mode: Mode, folder: Path, start: int) -> Callable[[int], None]:
    """The child: save versions start, start + 1, ... and report on the pipe.

    Before each save it sends ``-2 - v``, after it ``v`` (acknowledged: it returned).
    """

    def body(fd: int) -> None:
        save = mode.saver(folder)
        os.write(fd, struct.pack("<i", READY))
        for v in itertools.count(start):
            os.write(fd, struct.pack("<i", -2 - v))
            save(v)
            os.write(fd, struct.pack("<i", v))

    return body


@pytest.mark.slow
@pytest.mark.usefixtures("no_flush")
@pytest.mark.parametrize("name", sorted(MODES))
def test_random_kills_lose_nothing(tmp_path: Path, name: str, fork: Fork) -> None:
    """100 SIGKILLs at random moments of a child that saves in a loop, per mode.

    The child starts on whatever the previous one left, so kills also land in the
    repair of a previous kill's leftovers. After each kill: the invariants of
    :class:`Mode`, and the debris never piles up (each start removes the last).
    """
    mode = MODES[name]
    rng = np.random.default_rng(SEED)
    folder = tmp_path / "run"
    folder.mkdir()
    scratch = tmp_path / "calibrate"
    scratch.mkdir()
    times = []
    save = mode.saver(scratch)
    for v in range(6):
        t0 = time.perf_counter()
        save(v)
        times.append(time.perf_counter() - t0)
    del save  # gives the scratch folder's lock up
    save_time = scale = float(np.median(times))
    mode.save(folder, 0)
    acked = 0
    in_save = with_debris = unacknowledged_commits = acknowledged = 0
    for kill in range(KILLS):
        pid, fd = fork(_save_forever(mode, folder, acked + 1))
        assert _events(os.read(fd, 4)) == [READY]
        time.sleep(rng.uniform(0.0, 2.0 * scale))
        os.kill(pid, signal.SIGKILL)
        assert reap(pid), "the saving child ended by itself"
        events = _events(read_all(fd))
        acks = [v for v in events if v >= 0]
        acknowledged += len(acks)
        # Keep the kills around the child's first save or two, however fast the
        # machine: a freshly forked child is slower than the calibration above.
        scale *= 1.15 if not acks else 1 / 1.15 if len(acks) > 1 else 1.0
        in_save += bool(events) and events[-1] < READY
        left = debris(folder)
        with_debris += bool(left)
        assert len(left) <= 4, f"kill {kill} (seed {SEED}): debris piles up: {left}"
        last = acks[-1] if acks else acked
        try:
            visible = mode.check(folder, last)
        except Exception as exc:
            raise AssertionError(f"kill {kill} (seed {SEED}), last acknowledged {last}") from exc
        unacknowledged_commits += visible == last + 1
        acked = visible
        if name == "save_checkpoint":  # keep the folder small: drop old versions
            for old in folder.glob("c-*"):
                if int(old.name[2:]) < acked - 3:
                    shutil.rmtree(old)
    mode.save(folder, acked + 1)
    assert debris(folder) == []
    assert mode.check(folder, acked + 1) == acked + 1
    print(
        f"{name}: {KILLS} kills, {in_save} inside a save ({with_debris} left debris, "
        f"{unacknowledged_commits} after the commit); {acknowledged} saves returned; "
        f"one save takes {save_time * 1e3:.1f} ms, delays up to {2e3 * scale:.1f} ms at the end"
    )
    # The kills must land inside saves, at all stages, or the test proves nothing.
    assert in_save >= KILLS // 2, f"only {in_save} of {KILLS} kills landed inside a save"
    assert with_debris >= KILLS // 20, f"only {with_debris} kills left debris"
    # A kill during the commit's rename takes effect when the rename returns: those
    # count as landing after the commit.
    critical = with_debris + unacknowledged_commits
    assert critical >= KILLS // 4, f"only {critical} kills landed between write and return"
    assert acknowledged >= KILLS // 4, "the children hardly ever finished a save"


# --- full disk --------------------------------------------------------------------------


def fail_at(monkeypatch: pytest.MonkeyPatch, k: int, code: int) -> list[int]:
    """Make the k-th primitive call raise ``OSError(code)`` before it does anything."""
    calls = [0]
    for name in PRIMITIVES:
        real = getattr(atomic, name)

        def failing(*args: Any, _real: Callable[..., Any] = real) -> Any:
            calls[0] += 1
            if calls[0] == k:
                raise OSError(code, os.strerror(code))
            return _real(*args)

        monkeypatch.setattr(atomic, name, failing)
    return calls


def _assert_failed_cleanly(exc: CheckpointIOError, folder: Path, visible: int, code: int) -> None:
    assert exc.errno == code
    assert isinstance(exc, OSError)
    assert isinstance(exc.__cause__, OSError)
    assert str(folder) in str(exc)  # names the path
    saved_anyway = any(
        words in str(exc)
        for words in ("was saved", "new checkpoint is in place", "new file is in place")
    )
    # A failed save leaves the previous version, unless it failed after its commit
    # (deleting old checkpoints) and says so.
    assert visible == (1 if saved_anyway else 0), str(exc)
    if not saved_anyway:
        assert debris(folder) == []  # a failed save removes its own temporary files


@pytest.mark.usefixtures("no_flush")
@pytest.mark.parametrize("name", sorted(MODES))
def test_disk_full_at_every_step_of_a_save(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC from the 1st, 2nd, ... file-system call of a save, until it completes."""
    mode = MODES[name]
    failures = k = 0
    while True:
        k += 1
        folder = tmp_path / str(k)
        folder.mkdir()
        mode.save(folder, 0)
        error: CheckpointIOError | None = None
        with monkeypatch.context() as patch:
            calls = fail_at(patch, k, errno.ENOSPC)
            try:
                mode.save(folder, 1)
            except CheckpointIOError as exc:
                error = exc
        visible = mode.check(folder, 0)
        if error is None:
            assert visible == 1  # the save completed, or only a clean-up failed
            if calls[0] < k:  # the save made fewer calls: all fault points done
                break
        else:
            failures += 1
            assert "disk is full" in str(error)
            _assert_failed_cleanly(error, folder, visible, errno.ENOSPC)
        mode.save(folder, 2)  # with space again, the next save works and tidies up
        assert debris(folder) == []
        assert mode.check(folder, 2) == 2
    assert failures >= (5 if name == "save_state" else 10), f"{failures} of {k - 1}"


def _limited(limit: int, mode: Mode, folder: Path) -> Callable[[int], None]:
    def body(fd: int) -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            mode.save(folder, 1)
        except CheckpointIOError as exc:
            os.write(fd, f"{exc.errno}".encode())
        else:
            os.write(fd, b"saved")

    return body


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
@pytest.mark.usefixtures("no_flush")
@pytest.mark.parametrize("name", sorted(MODES))
def test_file_size_limit_mid_write(tmp_path: Path, name: str, fork: Fork) -> None:
    """A child whose files may not grow past a limit (RLIMIT_FSIZE): real short writes."""
    mode = MODES[name]
    rng = np.random.default_rng(SEED)
    limits = [0, 1, 100, *rng.integers(0, 4 * N + 2000, 12).tolist(), 10 * N]
    outcomes = []
    for i, limit in enumerate(limits):
        folder = tmp_path / str(i)
        folder.mkdir()
        mode.save(folder, 0)
        pid, fd = fork(_limited(int(limit), mode, folder))
        assert not reap(pid)
        outcome = read_all(fd).decode()
        outcomes.append(outcome)
        visible = mode.check(folder, 0)
        if outcome == "saved":
            assert visible == 1
        else:
            assert outcome == str(errno.EFBIG)
            assert visible == 0
            assert debris(folder) == []
    assert outcomes[0] == str(errno.EFBIG)
    assert outcomes[-1] == "saved"


# --- read-only folder --------------------------------------------------------------------


def _try_save(mode: Mode, folder: Path, as_user: int | None) -> Callable[[int], None]:
    def body(fd: int) -> None:
        if as_user is not None:
            os.setgid(as_user)
            os.setuid(as_user)
        try:
            mode.save(folder, 1)
        except CheckpointIOError as exc:
            os.write(fd, f"{exc.errno}\n{exc}".encode())
        else:
            os.write(fd, b"saved")

    return body


@pytest.mark.usefixtures("no_flush")
@pytest.mark.parametrize("name", sorted(MODES))
def test_read_only_folder(tmp_path: Path, name: str, fork: Fork) -> None:
    """Saving into a folder the process may not write: a clear error, nothing changed.

    As root (which may write anywhere) the save runs in a child that first becomes
    the user ``nobody``; the folder then lies outside pytest's private temp folder.
    """
    mode = MODES[name]
    root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
    base = Path(tempfile.mkdtemp()) if root else tmp_path
    try:
        base.chmod(0o755)
        folder = base / "ro"
        folder.mkdir(mode=0o755)
        mode.save(folder, 0)
        if root:
            pid, fd = fork(_try_save(mode, folder, as_user=65534))
            assert not reap(pid)
        else:
            folder.chmod(0o555)
            pid, fd = fork(_try_save(mode, folder, as_user=None))
            assert not reap(pid)
        code, _, message = read_all(fd).decode().partition("\n")
        assert code in (str(errno.EACCES), str(errno.EPERM)), code
        assert str(folder) in message
        assert "make the folder writable" in message
        folder.chmod(0o755)
        assert mode.check(folder, 0) == 0
        assert debris(folder) == []
    finally:
        for path in (base, *base.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        if root:
            shutil.rmtree(base)
