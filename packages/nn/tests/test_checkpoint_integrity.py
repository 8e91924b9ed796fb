"""Checkpoint folders: every file's checksum is stored in meta.json (which checks itself),
so any damaged byte, swapped file or edited manifest is a CheckpointCorruptError naming
the file; checkpoints saved before checksums existed still load, unverified.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from asgrad.nn.serialization import (
    CheckpointCorruptError,
    CheckpointManager,
    load_checkpoint,
    save_checkpoint,
)

SEED = 99


def save(path: Path, step: int) -> Path:
    return save_checkpoint(
        path,
        {"w": np.full((3, 4), step, np.float32), "b": np.arange(4, dtype=np.int64)},
        step=step,
        optimizer_state={"m.w": np.full((3, 4), -step, np.float32), "t": step},
        metrics={"val_loss": 0.5},
        extra={"config": {"hidden": 4}},
    )


def flip(path: Path, at: int, mask: int) -> bytes:
    good = path.read_bytes()
    bad = bytearray(good)
    bad[at] ^= mask
    path.write_bytes(bytes(bad))
    return good


@pytest.mark.parametrize("name", ["meta.json", "model.safetensors", "optimizer.safetensors"])
def test_a_flipped_byte_anywhere_is_caught_and_names_the_file(tmp_path: Path, name: str) -> None:
    folder = save(tmp_path / "c", 1)
    path = folder / name
    size = path.stat().st_size
    rng = np.random.default_rng(SEED)
    # 150 random bytes, and every byte of the end, where meta.json's checksum is.
    positions = {*rng.choice(size, 150, replace=False).tolist(), *range(size - 100, size)}
    for at in sorted(positions):
        good = flip(path, int(at), int(rng.integers(1, 256)))
        with pytest.raises(CheckpointCorruptError) as info:
            load_checkpoint(folder)
        assert str(path) in str(info.value), int(at)
        path.write_bytes(good)
    data = load_checkpoint(folder)
    assert data.verified
    assert data.step == 1


def test_a_file_from_another_checkpoint_is_caught(tmp_path: Path) -> None:
    one, two = save(tmp_path / "one", 1), save(tmp_path / "two", 2)
    shutil.copy(two / "model.safetensors", one / "model.safetensors")
    with pytest.raises(CheckpointCorruptError, match="belongs to another checkpoint"):
        load_checkpoint(one)


def test_an_edited_manifest_is_caught(tmp_path: Path) -> None:
    folder = save(tmp_path / "c", 1)
    meta = folder / "meta.json"
    text = meta.read_text()
    meta.write_text(text.replace('"step": 1', '"step": 5'))
    with pytest.raises(CheckpointCorruptError, match=r"meta\.json is damaged: its SHA-256"):
        load_checkpoint(folder)
    # Dropping the checksum lines does not turn it into an unverified old checkpoint.
    lines = [line for line in text.splitlines() if "meta_sha256" not in line]
    meta.write_text("\n".join(lines).replace("},\n}", "}\n}"))
    with pytest.raises(CheckpointCorruptError, match="checksum"):
        load_checkpoint(folder)


def _legacy(folder: Path, step: int) -> None:
    """A checkpoint as asgrad wrote it before checksums: no sha256 entries anywhere."""
    folder.mkdir(parents=True)
    model = {"w": np.full((3, 4), step, np.float32)}
    safetensors.numpy.save_file(
        model, folder / "model.safetensors", {"format": "asgrad-checkpoint"}
    )
    meta = {
        "format": "asgrad-checkpoint",
        "version": 1,
        "step": step,
        "epoch": None,
        "created": 0.0,
        "metrics": {"val_loss": 1.0},
        "scheduler_state": None,
        "rng_state": None,
        "extra": {},
        "model_keys": ["w"],
        "optimizer": None,
        "files": {"model.safetensors": (folder / "model.safetensors").stat().st_size},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))


def test_checkpoints_without_checksums_still_load_unverified(tmp_path: Path) -> None:
    _legacy(tmp_path / "ckpt-000000004", 4)
    mgr = CheckpointManager(tmp_path)
    data = mgr.load()
    assert data.step == 4
    assert not data.verified
    np.testing.assert_array_equal(data.model_state["w"], np.full((3, 4), 4, np.float32))
    # Unverified means a damaged tensor byte goes unnoticed (sizes are still checked).
    model = tmp_path / "ckpt-000000004" / "model.safetensors"
    flip(model, model.stat().st_size - 1, 0x01)
    assert mgr.load().model_state["w"][-1, -1] != 4
    model.write_bytes(model.read_bytes()[:-1])
    with pytest.raises(CheckpointCorruptError, match=r"expected \d+ bytes"):
        mgr.load()
    # New saves next to old checkpoints are verified.
    mgr.save(5, {"w": np.zeros(2)})
    assert mgr.load(5).verified


def test_an_old_manifest_missing_an_entry_is_a_checkpoint_error(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    _legacy(folder, 1)
    meta = json.loads((folder / "meta.json").read_text())
    for key, value in (("files", None), ("step", "one"), ("model_keys", ["w", "nope"])):
        broken = dict(meta)
        if value is None:
            del broken[key]
        else:
            broken[key] = value
        (folder / "meta.json").write_text(json.dumps(broken))
        with pytest.raises(CheckpointCorruptError) as info:
            load_checkpoint(folder)
        assert str(folder) in str(info.value)
        assert not isinstance(info.value.__cause__, CheckpointCorruptError)
