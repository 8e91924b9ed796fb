"""The CNN example: its accuracy bar, a disjoint test split, and the MNIST IDX reader."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asgrad.examples import cnn
from asgrad.examples.idx import IDXError, load_mnist, read_idx, write_idx


def test_digits_split_is_stratified_and_disjoint() -> None:
    split = cnn.load_digits_split(seed=0)
    assert split.x_train.shape[1:] == (1, 8, 8)
    assert len(split.y_train) + len(split.y_test) == 1797
    assert len(split.y_test) == 360  # ceil(20% of 1797)
    # No test image is also a training image (by content, not only by index).
    train_rows = {row.tobytes() for row in split.x_train.reshape(len(split.x_train), -1)}
    assert not any(row.tobytes() in train_rows for row in split.x_test.reshape(360, -1))
    # Stratified: every class keeps its share in the test set, to within one image.
    share = np.bincount(split.y_test, minlength=10) / 360
    overall = np.bincount(np.concatenate([split.y_train, split.y_test]), minlength=10) / 1797
    assert np.all(np.abs(share - overall) <= 1 / 360 + 1e-9)
    # Another seed draws another split.
    other = cnn.load_digits_split(seed=1)
    assert not np.array_equal(split.y_test, other.y_test)


def test_check_disjoint_catches_a_leaked_image() -> None:
    split = cnn.load_digits_split(seed=0)
    leaked = np.concatenate([split.x_test, split.x_train[:1]])
    with pytest.raises(AssertionError, match="1 test images"):
        cnn.check_disjoint(split.x_train, leaked)


def test_cnn_reaches_97_percent_on_held_out_digits() -> None:
    # The full default configuration (15 epochs), as `python -m asgrad.examples.cnn`.
    results = cnn.train(seed=0)
    assert results["test_accuracy"] >= 0.97, results
    assert results["n_test"] == 360
    assert results["epoch_losses"][-1] < results["epoch_losses"][0]


def test_cnn_model_accepts_any_batch_size() -> None:
    model = cnn.build_model((8, 8), seed=0)
    x = np.random.default_rng(0).random((5, 1, 8, 8), dtype=np.float32)
    assert cnn.predict(model, x, batch_size=2).shape == (5,)


# -- IDX ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path: Path, dtype: type, suffix: str) -> None:
    array: np.ndarray = (np.arange(24) - 5).reshape(2, 3, 4).astype(dtype)
    path = tmp_path / f"a-idx3{suffix}"
    write_idx(path, array)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, array)


def test_idx_reader_matches_the_format_byte_for_byte(tmp_path: Path) -> None:
    # Hand-written bytes: magic 0x00000803 (ubyte, 3 dims), dims 2 x 2 x 3, then data.
    raw = bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, *range(12)])
    (tmp_path / "x").write_bytes(raw)
    np.testing.assert_array_equal(read_idx(tmp_path / "x"), np.arange(12).reshape(2, 2, 3))
    # Big-endian int32 labels (type 0x0C).
    raw = bytes([0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF])
    (tmp_path / "y").write_bytes(raw)
    assert read_idx(tmp_path / "y").tolist() == [256, -1]


def test_idx_reader_rejects_bad_files(tmp_path: Path) -> None:
    (tmp_path / "magic").write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x01\x07")
    with pytest.raises(IDXError, match="not an IDX file"):
        read_idx(tmp_path / "magic")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(IDXError, match="truncated"):
        read_idx(tmp_path / "short")
    (tmp_path / "type").write_bytes(bytes([0, 0, 7, 1, 0, 0, 0, 1, 1]))
    with pytest.raises(IDXError, match="type code"):
        read_idx(tmp_path / "type")


def _tiny_mnist(directory: Path, n_train: int = 64, n_test: int = 32, gz: bool = True) -> None:
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        # Each class is a bright bar at its own row: learnable by a tiny model.
        images = rng.integers(0, 40, size=(n, 28, 28)).astype(np.uint8)
        for i, c in enumerate(labels):
            images[i, 2 + 2 * c : 4 + 2 * c, 4:24] = 255
        suffix = ".gz" if gz else ""
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels)


def test_load_mnist_reads_a_directory_of_idx_files(tmp_path: Path) -> None:
    _tiny_mnist(tmp_path)
    x_train, y_train, x_test, y_test = load_mnist(tmp_path)
    assert x_train.shape == (64, 1, 28, 28)
    assert x_train.dtype == np.float32
    assert x_test.shape == (32, 1, 28, 28)
    assert x_train.min() >= 0.0
    assert x_train.max() == 1.0
    assert y_train.dtype == np.int64
    assert y_test.tolist() == [i % 10 for i in range(32)]
    # A gzip file read regardless of its name, and a missing file named in the error.
    with gzip.open(tmp_path / "train-labels-idx1-ubyte.gz") as f:
        assert f.read(4) == b"\x00\x00\x08\x01"
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(IDXError, match="t10k-labels-idx1-ubyte"):
        load_mnist(tmp_path)


def test_cnn_command_trains_on_an_mnist_directory(tmp_path: Path) -> None:
    _tiny_mnist(tmp_path, gz=False)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "asgrad.examples.cnn",
            "--data",
            str(tmp_path),
            "--quiet",
            "--epochs",
            "3",
            "--batch-size",
            "16",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["example"] == "cnn"
    assert result["dataset"] == "mnist"
    assert (result["n_train"], result["n_test"], result["epochs"]) == (64, 32, 3)
    assert {"test_accuracy", "train_loss", "seconds", "device"} <= set(result)
