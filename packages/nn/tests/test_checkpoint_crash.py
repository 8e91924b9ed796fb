"""Crash safety: a process killed with SIGKILL in the middle of a save.

A child process saves checkpoints; the parent kills it at a chosen point (a patched
``atomic.fsync_file`` or ``shutil.rmtree`` announces it has reached that point and then
hangs) or at random moments, and then checks that the previous checkpoint still loads
intact and that the half-written one is never picked up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import asgrad.nn
from asgrad.nn.serialization import CheckpointManager, load_state

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

SRC = Path(asgrad.nn.__file__).resolve().parents[2]

CHILD = r"""
import shutil, sys, time
from pathlib import Path
import numpy as np
from asgrad.nn import serialization as ser
from asgrad.nn.serialization import atomic

root, marker, hang_at = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
N = 2_000_000  # 8 MB per tensor

def model(step):
    return {"w": np.full(N, step, np.float32), "b": np.full(7, step, np.float32)}

def optim(step):
    return {"m.w": np.full(N, -step, np.float32), "t": step}

def hang():
    marker.write_text("ready")
    time.sleep(600)

if hang_at == "save_state":
    ser.save_state(root / "weights.safetensors", model(1))
    real = atomic.fsync_file
    def fsync_then_hang(path):
        real(path)
        hang()
    atomic.fsync_file = fsync_then_hang
    ser.save_state(root / "weights.safetensors", model(2))
elif hang_at == "loop":
    mgr = ser.CheckpointManager(root, keep_last=2)
    step = 0
    while True:
        step += 1
        mgr.save(step, model(step), optim(step), metrics={"val_loss": 1.0 / step})
        print(step, flush=True)
else:
    mgr = ser.CheckpointManager(root, keep_last=1)
    mgr.save(1, model(1), optim(1), metrics={"val_loss": 1.0})
    if hang_at == "rotation":
        shutil.rmtree = lambda *a, **k: hang()
    else:
        real = atomic.fsync_file
        def fsync_then_maybe_hang(path):
            real(path)
            if path.name == hang_at:
                hang()
        atomic.fsync_file = fsync_then_maybe_hang
    # Step 2 is better, so with keep_last=1 rotation deletes step 1.
    mgr.save(2, model(2), optim(2), metrics={"val_loss": 0.5})
"""


def start_child(tmp_path: Path, hang_at: str) -> tuple[subprocess.Popen[str], Path, Path]:
    root, marker = tmp_path / "ckpts", tmp_path / "marker"
    root.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    # The child must import asgrad exactly as this process does (src layouts,
    # editable installs), so it gets this process's import path.
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, sys.path)])
    proc = subprocess.Popen(
        [sys.executable, str(script), str(root), str(marker), hang_at],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, root, marker


def wait_for(marker: Path, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            err = proc.communicate()[1]
            pytest.fail(f"child exited early ({proc.returncode}): {err}")
        if time.monotonic() > deadline:
            kill(proc)
            pytest.fail("child never reached the hang point")
        time.sleep(0.02)


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)  # reaps the child and closes the pipes
    assert proc.returncode == -signal.SIGKILL


def assert_checkpoint(mgr: CheckpointManager, step: int) -> None:
    data = mgr.load()
    assert data.step == step
    assert np.all(data.model_state["w"] == step)
    assert data.model_state["w"].size == 2_000_000
    assert np.all(data.model_state["b"] == step)
    assert data.optimizer_state is not None
    assert np.all(data.optimizer_state["m.w"] == -step)
    assert data.optimizer_state["t"] == step


@pytest.mark.parametrize("hang_at", ["model.safetensors", "optimizer.safetensors"])
def test_kill_mid_checkpoint_keeps_the_previous_one(tmp_path: Path, hang_at: str) -> None:
    proc, root, marker = start_child(tmp_path, hang_at)
    wait_for(marker, proc)
    kill(proc)
    # The half-written checkpoint is on disk under a temporary name...
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1
    assert leftovers[0].startswith(".tmp-ckpt-000000002")
    # ...and is ignored: "latest" and "best" are still the complete step 1.
    mgr = CheckpointManager(root, keep_last=1)
    assert mgr.steps() == [1]
    assert_checkpoint(mgr, 1)
    assert mgr.load("best").step == 1
    # The next save cleans up the debris.
    mgr.save(3, {"w": np.zeros(1)})
    assert sorted(p.name for p in root.iterdir()) == [
        "ckpt-000000001",
        "ckpt-000000003",
    ]


def test_kill_during_rotation_never_exposes_a_half_deleted_checkpoint(
    tmp_path: Path,
) -> None:
    proc, root, marker = start_child(tmp_path, "rotation")
    wait_for(marker, proc)  # step 2 is committed; deleting step 1 hangs
    kill(proc)
    # Step 1 was renamed away before its files were deleted, so it is simply gone.
    assert any(p.name.startswith(".trash-ckpt-000000001") for p in root.iterdir())
    mgr = CheckpointManager(root, keep_last=1)
    assert mgr.steps() == [2]
    assert_checkpoint(mgr, 2)
    assert mgr.load("best").step == 2
    assert next(p.name for p in mgr.cleanup()).startswith(".trash-")


def test_kill_mid_save_state_keeps_the_previous_file(tmp_path: Path) -> None:
    proc, root, marker = start_child(tmp_path, "save_state")
    wait_for(marker, proc)
    kill(proc)
    state = load_state(root / "weights.safetensors")
    assert np.all(state["w"] == 1)
    assert state["w"].size == 2_000_000
    # The new data reached the disk only under a temporary name.
    assert any(p.name.endswith(".tmp") for p in root.iterdir())


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1])
def test_random_kills_while_saving_in_a_loop(tmp_path: Path, delay: float) -> None:
    proc, root, _ = start_child(tmp_path, "loop")
    assert proc.stdout is not None
    first = proc.stdout.readline()  # wait until at least one checkpoint exists
    assert first.strip() == "1", proc.communicate()[1]
    time.sleep(delay)
    kill(proc)
    mgr = CheckpointManager(root, keep_last=2)
    steps = mgr.steps()
    assert steps, "no complete checkpoint survived"
    assert_checkpoint(mgr, steps[-1])
    for step in steps:
        data = mgr.load(step)
        assert np.all(data.model_state["w"] == step)
