"""Checkpoint folders and CheckpointManager."""

from __future__ import annotations

import errno
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.nn.serialization import (
    CheckpointCorruptError,
    CheckpointData,
    CheckpointError,
    CheckpointIOError,
    CheckpointManager,
    StateMismatchError,
    atomic,
    load_checkpoint,
    load_state,
    save_checkpoint,
)


def model_state(step: int) -> dict[str, np.ndarray]:
    return {
        "fc1.weight": np.full((4, 3), step, np.float32),
        "fc1.bias": np.full(3, -step, np.float32),
    }


def optimizer_state(step: int) -> dict[str, Any]:
    return {
        "lr": 0.01,
        "step": step,
        "m.fc1.weight": np.full((4, 3), 0.5 * step, np.float32),
        "betas": [0.9, 0.999],
        "count": np.int64(step),  # numpy scalars are stored as JSON numbers
    }


def test_full_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(42)
    rng.random(5)
    sched = {"last_epoch": 3, "base_lrs": [0.1], "name": "StepLR"}
    path = save_checkpoint(
        tmp_path / "ckpt-000000010",
        model_state(10),
        step=10,
        epoch=2,
        optimizer_state=optimizer_state(10),
        scheduler_state=sched,
        rng=rng,
        metrics={"val_loss": 0.25, "acc": np.float32(0.5)},
        extra={"config": {"hidden": 3, "act": "relu"}},
    )
    assert sorted(p.name for p in path.iterdir()) == [
        "meta.json",
        "model.safetensors",
        "optimizer.safetensors",
    ]
    data = load_checkpoint(path)
    assert (data.step, data.epoch, data.path) == (10, 2, path)
    assert list(data.model_state) == ["fc1.weight", "fc1.bias"]  # original order
    for k, v in model_state(10).items():
        np.testing.assert_array_equal(data.model_state[k], v)
    opt = data.optimizer_state
    assert opt is not None
    assert list(opt) == list(optimizer_state(10))
    assert opt["lr"] == 0.01
    assert opt["step"] == 10
    assert opt["betas"] == [0.9, 0.999]
    assert opt["count"] == 10
    np.testing.assert_array_equal(opt["m.fc1.weight"], np.full((4, 3), 5.0))
    assert data.scheduler_state == sched
    assert data.metrics == {"val_loss": 0.25, "acc": 0.5}
    assert data.extra == {"config": {"hidden": 3, "act": "relu"}}
    # The RNG continues exactly where the saved one stopped.
    np.testing.assert_array_equal(data.restore_rng().random(4), rng.random(4))
    # The tensor files are ordinary safetensors.
    assert load_state(path / "optimizer.safetensors").keys() == {"m.fc1.weight"}
    meta = json.loads((path / "meta.json").read_text())
    assert meta["format"] == "asgrad-checkpoint"
    assert meta["version"] == 1


def test_restore_rng_other_bit_generators(tmp_path: Path) -> None:
    for bit_generator in (
        np.random.MT19937(3),
        np.random.Philox(4),
        np.random.SFC64(5),
    ):
        rng = np.random.Generator(bit_generator)
        p = save_checkpoint(tmp_path / type(bit_generator).__name__, {}, step=0, rng=rng)
        restored = load_checkpoint(p).restore_rng()
        np.testing.assert_array_equal(restored.integers(0, 1000, 5), rng.integers(0, 1000, 5))
    with pytest.raises(CheckpointError, match="without rng"):
        CheckpointData(step=0, model_state={}).restore_rng()


def test_without_optimizer_there_is_no_optimizer_file(tmp_path: Path) -> None:
    p = save_checkpoint(tmp_path / "c", model_state(1), step=1)
    assert not (p / "optimizer.safetensors").exists()
    assert load_checkpoint(p).optimizer_state is None


def test_bad_values_fail_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="JSON"):
        save_checkpoint(tmp_path / "c", model_state(1), step=1, extra={"f": object()})
    with pytest.raises(CheckpointError, match="dtype"):
        save_checkpoint(tmp_path / "c", {"x": np.array([None])}, step=1)
    assert list(tmp_path.iterdir()) == []


def test_existing_checkpoint_needs_overwrite(tmp_path: Path) -> None:
    p = save_checkpoint(tmp_path / "c", model_state(1), step=1)
    with pytest.raises(CheckpointError, match="overwrite=True"):
        save_checkpoint(p, model_state(2), step=2)
    save_checkpoint(p, model_state(2), step=2, overwrite=True)
    assert load_checkpoint(p).step == 2
    # No temporary or replaced folder is left; the writer lock file stays.
    assert sorted(x.name for x in tmp_path.iterdir()) == [".asgrad.lock", "c"]


def test_damaged_checkpoints_are_detected(tmp_path: Path) -> None:
    p = save_checkpoint(tmp_path / "c", model_state(1), step=1)
    model = p / "model.safetensors"
    model.write_bytes(model.read_bytes()[:-8])
    with pytest.raises(CheckpointCorruptError, match="damaged"):
        load_checkpoint(p)
    (p / "meta.json").write_text("{not json")
    with pytest.raises(
        CheckpointCorruptError, match=r"meta\.json is damaged: it is not valid JSON"
    ):
        load_checkpoint(p)
    (p / "meta.json").write_text(json.dumps({"format": "asgrad-checkpoint", "version": 99}))
    with pytest.raises(CheckpointError, match="upgrade"):
        load_checkpoint(p)


def test_manager_rotation_keeps_last_and_best(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_last=2, metric="val_loss", mode="min")
    losses = {1: 0.9, 2: 0.3, 3: 0.5, 4: 0.4, 5: 0.6}
    for step, loss in losses.items():
        mgr.save(step, model_state(step), metrics={"val_loss": loss})
    assert mgr.steps() == [2, 4, 5]  # last two plus the best (step 2)
    assert mgr.best() == mgr.path_for(2)
    assert mgr.latest() == mgr.path_for(5)
    assert mgr.load("best").step == 2
    assert mgr.load().step == 5
    assert mgr.load(4).step == 4
    np.testing.assert_array_equal(mgr.load("best").model_state["fc1.weight"], 2.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".asgrad.lock",
        "ckpt-000000002",
        "ckpt-000000004",
        "ckpt-000000005",
    ]


def test_manager_mode_max_ties_nan_and_missing_metric(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_last=1, metric="acc", mode="max")
    mgr.save(1, model_state(1), metrics={"acc": 0.7})
    mgr.save(2, model_state(2), metrics={"acc": 0.7})  # tie: the earlier one stays best
    mgr.save(3, model_state(3), metrics={"acc": math.nan})
    mgr.save(4, model_state(4))  # no metric at all
    assert mgr.steps() == [1, 4]
    assert mgr.load("best").step == 1


def test_manager_keep_best_false_and_keep_all(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path / "a", keep_last=1, keep_best=False)
    for step in range(3):
        mgr.save(step, model_state(step), metrics={"val_loss": -step if step else -9})
    assert mgr.steps() == [2]
    keep_all = CheckpointManager(tmp_path / "b", keep_last=None)
    for step in range(4):
        keep_all.save(step, model_state(step))
    assert keep_all.steps() == [0, 1, 2, 3]
    assert keep_all.best() is None  # no checkpoint has val_loss


def test_manager_latest_is_the_highest_step_and_resave_replaces(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep_last=5)
    mgr.save(20, model_state(20))
    mgr.save(10, model_state(10))
    assert mgr.load().step == 20
    mgr.save(20, model_state(21))
    np.testing.assert_array_equal(mgr.load(20).model_state["fc1.bias"], -21.0)


def test_manager_load_validates_against_the_model(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model_state(1))
    mgr.load(expected=model_state(0))
    wrong = {"fc1.weight": np.zeros((3, 4), np.float32)}
    with pytest.raises(StateMismatchError, match="transposed"):
        mgr.load(expected=wrong)
    mgr.load(expected={"fc1.weight": np.zeros((4, 3), np.float32)}, strict=False)


def test_manager_errors_on_empty_or_unknown(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path / "nothing")
    assert mgr.latest() is None
    assert mgr.best() is None
    assert mgr.steps() == []
    with pytest.raises(CheckpointError, match="no latest checkpoint"):
        mgr.load()
    mgr.save(3, model_state(3))
    with pytest.raises(CheckpointError, match="step 4"):
        mgr.load(4)
    with pytest.raises(CheckpointError, match="which"):
        mgr.load("first")  # type: ignore[arg-type]  # wrong on purpose
    with pytest.raises(CheckpointError, match="keep_last"):
        CheckpointManager(tmp_path, keep_last=0)


def test_half_written_folders_are_ignored_and_cleaned(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model_state(1))
    # What a crash leaves behind: a temporary folder, a folder being deleted, and a
    # foreign folder that looks like a checkpoint but has no meta.json.
    (tmp_path / ".tmp-ckpt-000000002-0a1b2c3d").mkdir()
    (tmp_path / ".tmp-ckpt-000000002-0a1b2c3d" / "model.safetensors").write_bytes(b"xx")
    (tmp_path / ".trash-ckpt-000000000-1-2").mkdir()
    (tmp_path / "ckpt-000000009").mkdir()
    (tmp_path / ".tmp-not-ours").mkdir()  # not a name asgrad makes: left alone
    assert mgr.steps() == [1]
    assert mgr.load().step == 1
    assert {p.name for p in mgr.cleanup()} == {
        ".tmp-ckpt-000000002-0a1b2c3d",
        ".trash-ckpt-000000000-1-2",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".asgrad.lock",
        ".tmp-not-ours",
        "ckpt-000000001",
        "ckpt-000000009",
    ]


def test_failed_checkpoint_save_leaves_previous_and_no_debris(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model_state(1))
    calls = {"n": 0}
    real = atomic.fsync

    def fail_second(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(atomic, "fsync", fail_second)
    with pytest.raises(CheckpointIOError, match="I/O error") as info:
        mgr.save(2, model_state(2), optimizer_state=optimizer_state(2))
    assert isinstance(info.value, OSError)  # still an OSError, errno kept
    assert info.value.errno == errno.EIO
    assert isinstance(info.value.__cause__, OSError)
    assert mgr.steps() == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".asgrad.lock", "ckpt-000000001"]
