"""Tensor files: the checksum catches any damaged byte, the format stays plain safetensors,
the reader is as strict as the safetensors library, and ``save_state`` refuses what a
reader would reject.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy

from asgrad.nn.serialization import (
    CheckpointCorruptError,
    CheckpointError,
    InvalidStateError,
    atomic,
    load_state,
    read_metadata,
    save_state,
    tensorfile,
)

SEED = 1234


def small_state() -> dict[str, np.ndarray]:
    return {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "n": np.array(7, np.int64),
        "mask": np.array([True, False, True]),
    }


def flipped(data: bytes, at: int, mask: int) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def test_every_single_byte_flip_is_caught(tmp_path: Path) -> None:
    path = save_state(tmp_path / "s.safetensors", small_state(), {"note": "hi"})
    good = path.read_bytes()
    rng = np.random.default_rng(SEED)
    for at in range(len(good)):
        path.write_bytes(flipped(good, at, int(rng.integers(1, 256))))
        with pytest.raises(CheckpointCorruptError) as info:
            load_state(path)
        assert str(path) in str(info.value), at
        assert info.value.path == path
    path.write_bytes(good)
    assert load_state(path)["n"] == 7


def test_truncated_or_extended_files_are_caught(tmp_path: Path) -> None:
    path = save_state(tmp_path / "s.safetensors", small_state())
    good = path.read_bytes()
    for size in range(len(good)):
        path.write_bytes(good[:size])
        with pytest.raises(CheckpointCorruptError):
            load_state(path)
    path.write_bytes(good + b"\0")
    with pytest.raises(CheckpointCorruptError, match="file holds"):
        load_state(path)


def test_the_checksum_is_sha256_of_the_file_with_its_digits_zeroed(tmp_path: Path) -> None:
    path = save_state(tmp_path / "s.safetensors", small_state())
    data = path.read_bytes()
    stored = safetensors.safe_open(str(path), framework="np").metadata()
    assert stored["asgrad.integrity"] == "sha256"
    digits = stored["asgrad.sha256"].encode()
    at = data.index(digits)
    zeroed = data[:at] + b"0" * 64 + data[at + 64 :]
    assert hashlib.sha256(zeroed).hexdigest() == stored["asgrad.sha256"]


def test_files_load_with_the_safetensors_library(tmp_path: Path) -> None:
    state = {
        **small_state(),
        "half": np.ones((2, 2), np.float16),
        "empty": np.zeros((0, 5), np.float32),
        "u8": np.arange(5, dtype=np.uint8),
        "i16": np.arange(-3, 3, dtype=np.int16),
        "f64": np.linspace(0, 1, 7),
        "unicode ключ": np.zeros(1, np.float32),
    }
    path = save_state(tmp_path / "s.safetensors", state, {"epoch": "3"})
    theirs = safetensors.numpy.load_file(path)
    assert theirs.keys() == state.keys()
    for key, value in state.items():
        np.testing.assert_array_equal(theirs[key], value, strict=True)
    with safetensors.safe_open(str(path), framework="np") as f:
        assert f.metadata()["epoch"] == "3"
    # The checksum entries are asgrad's: read_metadata shows only the user's.
    assert read_metadata(path) == {"epoch": "3"}
    # The header is padded to 8 bytes, so every tensor is aligned as upstream writes.
    (size,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert size % 8 == 0


def test_reader_is_at_least_as_strict_as_the_safetensors_library(tmp_path: Path) -> None:
    """Damage files without a checksum (written by safetensors itself) at random: when
    the library rejects one, load_state does too; when load_state accepts, they agree."""
    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file(small_state(), plain, metadata={"k": "v"})
    good = plain.read_bytes()
    rng = np.random.default_rng(SEED)
    agreed = rejected = 0
    for _ in range(600):
        at = int(rng.integers(0, len(good)))
        data = flipped(good, at, int(rng.integers(1, 256)))
        if rng.random() < 0.2:
            data = data[: int(rng.integers(0, len(data)))]
        plain.write_bytes(data)
        try:
            theirs = safetensors.numpy.load_file(plain)
        except Exception:
            theirs = None
        try:
            mine = load_state(plain)
        except CheckpointError:
            mine = None
            rejected += 1
        if theirs is None:
            assert mine is None, f"accepted what safetensors rejects (byte {at})"
        elif mine is not None:
            agreed += 1
            assert mine.keys() == theirs.keys()
            for key in mine:
                np.testing.assert_array_equal(mine[key], theirs[key], strict=True)
    assert agreed > 50  # flips in tensor data load (unverified) in both
    assert rejected > 50


def test_files_of_other_writers_load_unverified(tmp_path: Path) -> None:
    path = tmp_path / "theirs.safetensors"
    safetensors.numpy.save_file({"x": np.arange(4.0)}, path, metadata={"a": "b"})
    assert load_state(path)["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert read_metadata(path) == {"a": "b"}
    data = path.read_bytes()
    path.write_bytes(flipped(data, len(data) - 1, 0x01))  # no checksum: not detected
    assert load_state(path)["x"][-1] != 3.0


def test_a_damaged_checksum_entry_is_not_mistaken_for_an_old_file(tmp_path: Path) -> None:
    path = save_state(tmp_path / "s.safetensors", small_state())
    good = path.read_bytes()
    for old, new in ((b'"asgrad.sha256"', b'"asgrad.sha25&"'), (b"integrity", b"integritz")):
        path.write_bytes(good.replace(old, new))
        with pytest.raises(CheckpointCorruptError, match="checksum"):
            load_state(path)


def test_keys_a_reader_would_reject_are_refused_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "s.safetensors"
    with pytest.raises(InvalidStateError, match="'__metadata__' is reserved"):
        save_state(target, {"__metadata__": np.zeros(2)})
    with pytest.raises(InvalidStateError, match="UTF-8"):
        save_state(target, {"bad\ud800": np.zeros(2)})
    with pytest.raises(InvalidStateError, match="reserved"):
        save_state(target, {"x": np.zeros(2)}, {"asgrad.sha256": "0"})
    with pytest.raises(InvalidStateError, match="reserved"):
        save_state(target, {"x": np.zeros(2)}, {"asgrad.integrity": "none"})
    with pytest.raises(InvalidStateError, match="UTF-8"):
        save_state(target, {"x": np.zeros(2)}, {"k": "\udc80"})
    assert list(tmp_path.iterdir()) == []
    # Keys that look odd but that readers accept are fine.
    odd = {"a\x00b": np.zeros(1), " ": np.ones(1), '"q"': np.ones(2), "{": np.ones(3)}
    save_state(target, odd, {"__metadata__": "x", '"': "}"})
    assert load_state(target).keys() == odd.keys()
    assert safetensors.numpy.load_file(target).keys() == odd.keys()
    assert read_metadata(target) == {"__metadata__": "x", '"': "}"}


def test_a_header_too_large_for_readers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tensorfile, "MAX_HEADER", 1000)
    state = {f"layer{i}.weight": np.zeros(1, np.float32) for i in range(40)}
    with pytest.raises(InvalidStateError, match="safetensors readers accept"):
        save_state(tmp_path / "s.safetensors", state)
    assert list(tmp_path.iterdir()) == []


def test_a_header_that_claims_more_than_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "h.safetensors"
    header = json.dumps({"x": {"dtype": "F32", "shape": [10**12], "data_offsets": [0, 4 * 10**12]}})
    raw = header.encode() + b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 16)
    with pytest.raises(CheckpointCorruptError, match="file holds"):
        load_state(path)  # checked before any memory is allocated
    raw = b'{"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}'
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)
    with pytest.raises(CheckpointCorruptError, match="'BF16', which numpy cannot"):
        load_state(path)


def test_an_array_changed_during_the_save_still_gives_a_valid_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread updating parameters mid-save: the bytes hashed are the bytes written."""
    weights = np.zeros(1000, np.float32)
    real = atomic.write

    def write_while_training(fd: int, data: bytes | memoryview) -> None:
        weights[:] += 1  # the "other thread" steps the optimizer right now
        real(fd, data)

    monkeypatch.setattr(atomic, "write", write_while_training)
    path = save_state(tmp_path / "s.safetensors", {"w": weights})
    monkeypatch.undo()
    loaded = load_state(path)["w"]
    assert loaded.shape == (1000,)
    assert np.all(loaded == loaded[0])
