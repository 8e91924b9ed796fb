"""save_state / load_state / check_state."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from asgrad.nn.serialization import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointIOError,
    StateMismatchError,
    atomic,
    check_state,
    load_state,
    read_metadata,
    save_state,
)


def test_round_trip_keeps_values_dtypes_and_shapes(tmp_path: Path) -> None:
    state: dict[str, np.ndarray] = {
        "linear.weight": np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32),
        "linear.bias": np.zeros(4, np.float64),
        "steps": np.array(7, np.int64),
        "mask": np.array([True, False]),
        "half": np.ones((2, 2), np.float16),
        "empty": np.zeros((0, 5), np.float32),
        "strided": np.arange(10, dtype=np.int32)[::2],  # not contiguous
    }
    path = save_state(tmp_path / "sub" / "model.safetensors", state, {"epoch": "3"})
    loaded = load_state(path)
    assert loaded.keys() == state.keys()
    for k, v in state.items():
        assert loaded[k].dtype == v.dtype
        assert loaded[k].shape == v.shape
        np.testing.assert_array_equal(loaded[k], v)
    assert read_metadata(path) == {"epoch": "3"}
    loaded["linear.bias"] += 1  # loaded arrays are writable


def test_files_are_plain_safetensors(tmp_path: Path) -> None:
    path = save_state(tmp_path / "a.safetensors", {"x": np.arange(3.0)})
    np.testing.assert_array_equal(safetensors.numpy.load_file(path)["x"], [0, 1, 2])
    # ...and files from any safetensors writer load too.
    safetensors.numpy.save_file({"y": np.ones(2, np.int8)}, tmp_path / "b.safetensors")
    assert load_state(tmp_path / "b.safetensors")["y"].tolist() == [1, 1]


def test_overwrite_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "s.safetensors"
    save_state(target, {"v": np.zeros(2)})
    save_state(target, {"v": np.ones(3)})
    assert load_state(target)["v"].tolist() == [1.0, 1.0, 1.0]
    assert os.listdir(tmp_path) == ["s.safetensors"]


def test_failed_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "s.safetensors"
    save_state(target, {"v": np.zeros(2)})

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "fsync", broken_fsync)
    with pytest.raises(CheckpointIOError, match="disk is full") as info:
        save_state(target, {"v": np.ones(2)})
    assert isinstance(info.value, OSError)
    assert "previous file is unchanged" in str(info.value)
    assert load_state(target)["v"].tolist() == [0.0, 0.0]
    assert os.listdir(tmp_path) == ["s.safetensors"]


def test_invalid_inputs(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="object"):
        save_state(tmp_path / "x", {"bad": np.array([None])})
    with pytest.raises(CheckpointError, match="float32"):  # lists the supported dtypes
        save_state(tmp_path / "x", {"s": np.array(["a"])})
    with pytest.raises(CheckpointError, match="str to str"):
        save_state(tmp_path / "x", {"a": np.zeros(1)}, {"n": 1})  # type: ignore[dict-item]  # wrong on purpose
    with pytest.raises(CheckpointError, match="no file"):
        load_state(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 3)
    with pytest.raises(CheckpointCorruptError, match="not a safetensors file"):
        load_state(tmp_path / "junk.safetensors")


def test_truncated_file_is_reported(tmp_path: Path) -> None:
    path = save_state(tmp_path / "t.safetensors", {"w": np.zeros(1000)})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        load_state(path)


def test_check_state_passes_on_a_match() -> None:
    expected = {"w": np.zeros((2, 3), np.float32), "b": ((3,), np.float32)}
    check_state(expected, {"w": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)})


def test_check_state_lists_every_problem_at_once() -> None:
    expected = {
        "enc.weight": ((4, 8), "float32"),
        "enc.bias": ((8,), "float32"),
        "dec.weight": ((8, 4), "float32"),
        "steps": ((), "int64"),
    }
    loaded = {
        "enc.weight": np.zeros((8, 4), np.float32),  # transposed
        "enc.bais": np.zeros(8, np.float32),  # typo: missing + unexpected
        "dec.weight": np.zeros((8, 4), np.float64),  # dtype
        "extra.thing": np.zeros(1, np.float32),
    }
    with pytest.raises(StateMismatchError) as info:
        check_state(expected, loaded)
    err = info.value
    assert err.missing == ["enc.bias", "steps"]
    assert err.unexpected == ["enc.bais", "extra.thing"]
    assert err.mismatched == ["dec.weight", "enc.weight"]
    text = str(err)
    assert "2 missing, 2 unexpected, 2 mismatched" in text
    assert "did you mean 'enc.bais'" in text
    assert "(transposed?)" in text
    assert "astype('float32')" in text
    assert "hint:" in text
    assert isinstance(err, CheckpointError)
    assert isinstance(err, KeyError)


def test_check_state_non_strict_ignores_extras_only() -> None:
    check_state({"a": ((1,), "f4")}, {"a": np.zeros(1, "f4"), "b": np.zeros(1)}, strict=False)
    with pytest.raises(StateMismatchError):
        check_state({"a": ((1,), "f4")}, {"b": np.zeros(1)}, strict=False)
