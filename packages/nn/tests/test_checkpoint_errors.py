"""Checkpoint and state I/O raise CheckpointError subclasses naming the path and what to
do, never a bare IsADirectoryError, OSError, KeyError or SafetensorError; the original
is kept as ``__cause__``, and the I/O errors stay ``OSError``\\ s.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest

from asgrad.nn.errors import NNError
from asgrad.nn.serialization import (
    CheckpointCorruptError,
    CheckpointData,
    CheckpointError,
    CheckpointIOError,
    CheckpointManager,
    CheckpointNotFoundError,
    InvalidStateError,
    load_checkpoint,
    load_state,
    read_metadata,
    save_checkpoint,
    save_state,
)
from asgrad.tensor.errors import AsgradError


def test_the_classes_and_their_builtin_bases() -> None:
    for cls in (
        CheckpointNotFoundError,
        CheckpointCorruptError,
        CheckpointIOError,
        InvalidStateError,
    ):
        assert issubclass(cls, CheckpointError)
        assert issubclass(cls, NNError)
        assert issubclass(cls, AsgradError)
    assert issubclass(CheckpointNotFoundError, FileNotFoundError)
    assert issubclass(CheckpointIOError, OSError)
    assert issubclass(CheckpointCorruptError, ValueError)
    assert issubclass(InvalidStateError, ValueError)
    err = CheckpointIOError("message", path=Path("p"), errno=errno.ENOSPC)
    assert (str(err), err.errno, err.path) == ("message", errno.ENOSPC, Path("p"))


def test_save_state_onto_a_folder(tmp_path: Path) -> None:
    (tmp_path / "w.safetensors").mkdir()
    with pytest.raises(CheckpointIOError, match="is a folder; give the path of a file") as info:
        save_state(tmp_path / "w.safetensors", {"x": np.zeros(1)})
    assert info.value.errno == errno.EISDIR
    assert info.value.path == tmp_path / "w.safetensors"


def test_save_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointIOError) as info:
        save_state(tmp_path / "file" / "w.safetensors", {"x": np.zeros(1)})
    assert isinstance(info.value.__cause__, OSError)
    assert str(tmp_path / "file" / "w.safetensors") in str(info.value)
    with pytest.raises(CheckpointIOError) as info:
        save_checkpoint(tmp_path / "file" / "ckpt", {"x": np.zeros(1)}, step=0)
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(CheckpointIOError) as info:
        CheckpointManager(tmp_path / "file").save(1, {"x": np.zeros(1)})
    assert "choose another path" in str(info.value)


def test_loading_the_wrong_kind_of_path(tmp_path: Path) -> None:
    with pytest.raises(CheckpointIOError, match="is a folder, not a tensor file") as info:
        load_state(tmp_path)
    assert info.value.errno == errno.EISDIR
    with pytest.raises(CheckpointIOError, match="is a folder"):
        read_metadata(tmp_path)
    with pytest.raises(CheckpointNotFoundError, match="no such file or folder; check"):
        read_metadata(tmp_path / "missing.safetensors")
    state_file = save_state(tmp_path / "w.safetensors", {"x": np.zeros(1)})
    with pytest.raises(CheckpointIOError, match="single tensor file loads with load_state") as info:
        load_checkpoint(state_file)
    assert info.value.errno == errno.ENOTDIR
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "nothing")
    with pytest.raises(CheckpointNotFoundError, match=r"has no meta\.json"):
        load_checkpoint(tmp_path)


def test_saving_onto_something_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match="is not a checkpoint folder"):
        save_checkpoint(tmp_path / "data", {"x": np.zeros(1)}, step=0, overwrite=True)
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="is not a checkpoint folder"):
        save_checkpoint(tmp_path / "file", {"x": np.zeros(1)}, step=0, overwrite=True)
    assert (tmp_path / "file").read_text() == "x"


def test_manifest_errors_are_not_key_errors(tmp_path: Path) -> None:
    folder = save_checkpoint(tmp_path / "c", {"x": np.zeros(1)}, step=0)
    (folder / "meta.json").write_text(json.dumps({"format": "asgrad-checkpoint", "version": 1}))
    with pytest.raises(CheckpointCorruptError, match="'step' is missing"):
        load_checkpoint(folder)
    (folder / "meta.json").write_text("[]")
    with pytest.raises(CheckpointCorruptError, match="not a JSON object"):
        load_checkpoint(folder)
    (folder / "meta.json").write_text(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(CheckpointCorruptError, match="check the path"):
        load_checkpoint(folder)


def test_bad_values_are_invalid_state_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidStateError, match="JSON"):
        save_checkpoint(tmp_path / "c", {"x": np.zeros(1)}, step=0, extra={"f": object()})
    with pytest.raises(InvalidStateError, match="dtype"):
        save_state(tmp_path / "s", {"x": np.array(["a"])})
    with pytest.raises(InvalidStateError, match="non-empty strings"):
        save_state(tmp_path / "s", {"": np.zeros(1)})
    assert list(tmp_path.iterdir()) == []


def test_a_manifest_cannot_point_outside_its_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.safetensors").write_bytes(b"")
    folder = save_checkpoint(tmp_path / "c", {"x": np.zeros(1)}, step=0)
    meta = json.loads((folder / "meta.json").read_text())
    del meta["sha256"], meta["meta_sha256"]  # an old-style manifest, edited
    meta["files"] = {
        "model.safetensors": meta["files"]["model.safetensors"],
        "../secret.safetensors": 0,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointCorruptError, match="file list"):
        load_checkpoint(folder)


def test_malformed_rng_state_and_nested_json(tmp_path: Path) -> None:
    data = CheckpointData(step=0, model_state={}, rng_state={"bit_generator": "PCG64"})
    with pytest.raises(CheckpointCorruptError, match="PCG64 state is malformed"):
        data.restore_rng()
    path = tmp_path / "deep.safetensors"
    header = b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(CheckpointCorruptError, match="not valid JSON"):
        load_state(path)
