"""Products whose output is small beside K (weight gradients, above all a first
convolution's): K cut into as many pieces as fill the GPU, summed by a second pass,
against numpy, the same bits run to run, and the rule and the tuner choosing it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering import lower
from asgrad.gpu.lowering.linalg import (
    FILL_GROUPS,
    MAX_SPLITS,
    SMALL,
    THIN_PIECE_K,
    TINY,
    MatrixView,
    fill_splits,
    matmul,
    matmul_into,
    select,
)
from asgrad.tensor import TensorType, get_op

Array = np.ndarray


def _groups(name: str, M: int, N: int) -> int:
    t = tiles.tile(name)
    return -(-M // t.bm) * -(-N // t.bn)


def test_the_rule_splits_a_small_output_over_long_k_until_the_gpu_is_full() -> None:
    # a first convolution's weight gradient: 16 x 9 outputs, K = 32 * 28 * 28
    tile, splits = select(16, 9, 25088, 1, layouts=("k", "k"))
    assert tile == TINY  # 16x16 tiles waste less of the output than 32x32 ones
    assert splits > MAX_SPLITS
    assert _groups(tile, 16, 9) * splits <= FILL_GROUPS
    assert 25088 // splits >= THIN_PIECE_K
    # the second one: 32 x 144 outputs fill most of a 32x32 tile's grid
    tile, splits = select(32, 144, 6272, 1, layouts=("k", "k"))
    assert tile == SMALL
    assert FILL_GROUPS // 2 <= _groups(tile, 32, 144) * splits <= FILL_GROUPS
    # the pieces stay at least THIN_PIECE_K long where K is shorter
    assert select(5, 36, 4608, 1) == (TINY, 4608 // THIN_PIECE_K)
    assert fill_splits(300, 10**6) == 1
    assert fill_splits(1, 100) == 1


def test_the_tuner_times_split_counts_up_to_twice_the_filling_grid() -> None:
    deep = tuning.Problem(16, 9, 25088, 1, ("k", "k"), kind="conv-backward_weight")
    chosen = tuning.candidates(deep, select(16, 9, 25088, 1, layouts=("k", "k")))
    split = [(t, s) for t, s in chosen if s > 1]
    assert max(s for _, s in split) * _groups(TINY, 16, 9) >= FILL_GROUPS
    for name, s in split:
        assert 25088 // s >= tuning.MIN_PIECE
        assert s in tuning.SPLITS or _groups(name, 16, 9) * s <= 2 * tuning.FILL_GROUPS
    # an output smaller than every split tile still gets split candidates: the tiles
    # wasting least
    tiny = tuning.Problem(3, 2, 8192, 1)
    names = {t for t, s in tuning.candidates(tiny, ("x", 1)) if s > 1}
    assert names == {TINY, "32x32_4x4_k8d"}
    # a batch of few tiles (a grouped convolution's weight gradient) is split too
    grouped = tuning.Problem(2, 18, 8192, 2, ("k", "k"), kind="conv-backward_weight")
    assert any(s > 1 for _, s in tuning.candidates(grouped, ("x", 1)))
    # a product filling the GPU is not split
    full = tuning.Problem(2048, 2048, 8192, 1)
    assert all(s == 1 for _, s in tuning.candidates(full, ("x", 1)))


def _view(device: Device, x: Array, transposed: bool) -> MatrixView:
    if transposed:  # stored transposed, read through swapped strides
        return MatrixView(to_gpu(np.ascontiguousarray(x.T), device)).transpose()
    return MatrixView(to_gpu(x, device))


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("tile", "splits", "transpose"),
    [(TINY, 40, (True, False)), (SMALL, 23, (False, True)), (None, None, (True, False))],
)
def test_many_pieces_of_k_match_numpy_and_repeat_bit_for_bit(
    device: Device,
    monkeypatch: pytest.MonkeyPatch,
    tile: str | None,
    splits: int | None,
    transpose: tuple[bool, bool],
) -> None:
    """Odd sizes (13 x 7 outputs, K = 3001: no multiple of a tile or of BK), many
    pieces, the last one shorter; by the rule where no tile is forced."""
    monkeypatch.setenv(tuning.ENV, "0")
    rng = np.random.default_rng(31)
    a = rng.standard_normal((13, 3001)).astype(np.float32)
    b = rng.standard_normal((3001, 7)).astype(np.float32)
    va, vb = _view(device, a, transpose[0]), _view(device, b, transpose[1])
    first = matmul(va, vb, tile, splits).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-3)
    again = matmul(va, vb, tile, splits).numpy()
    np.testing.assert_array_equal(first, again)  # a fixed order of sums, no atomics


@pytest.mark.gpu
def test_float16_operands_split_into_many_pieces_are_summed_in_float32(device: Device) -> None:
    if "shader-f16" not in device.capabilities.features:
        pytest.skip("the adapter has no shader-f16")
    rng = np.random.default_rng(32)
    a = rng.standard_normal((9, 1500)).astype(np.float16)
    b = rng.standard_normal((1500, 11)).astype(np.float16)
    got = matmul(to_gpu(a, device), to_gpu(b, device), TINY, 47).numpy()
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=0.1)


def _labels(device: Device, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The label and workgroup count of every dispatch recorded from now on."""
    seen: list[tuple[str, int]] = []
    dispatch = device.dispatch

    def record(pipe: Any, buffers: Any, groups: tuple[int, int, int]) -> None:
        seen.append((pipe.label, groups[0] * groups[1] * groups[2]))
        dispatch(pipe, buffers, groups)

    monkeypatch.setattr(device, "dispatch", record)
    return seen


@pytest.mark.gpu
def test_a_long_convolution_weight_gradient_runs_split_to_fill_the_gpu(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first convolution (1 -> 4 channels, 3x3, padding 1) over 16 images of 14 x 14:
    4 x 9 outputs, K = 16 * 196. The gathered product runs as TINY tiles over many
    pieces of K, then their sum; the result matches numpy and repeats bit for bit."""
    monkeypatch.setenv(tuning.ENV, "0")
    rng = np.random.default_rng(33)
    x = rng.standard_normal((16, 1, 14, 14)).astype(np.float32)
    gy = rng.standard_normal((16, 4, 14, 14)).astype(np.float32)
    op = get_op("conv2d_backward_weight")
    attrs = op.normalize_attrs({"padding": (1, 1), "kernel_size": (3, 3)})
    out_type = op.infer([TensorType(v.shape, "float32") for v in (x, gy)], attrs)
    ins = [to_gpu(x, device), to_gpu(gy, device)]
    seen = _labels(device, monkeypatch)
    got = lower("conv2d_backward_weight", ins, attrs, out_type).numpy()
    products = [(label, g) for label, g in seen if label.startswith("linalg_matmul")]
    assert len(products) == 1
    label, groups = products[0]
    assert label.startswith(f"linalg_matmul {TINY} k k")
    assert MAX_SPLITS < groups <= fill_splits(1, 16 * 196)  # one tile, many pieces
    assert len(seen) >= 2  # the pieces, then their sum
    want = op.kernel(x.astype(np.float64), gy.astype(np.float64), **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    again = lower("conv2d_backward_weight", ins, attrs, out_type).numpy()
    np.testing.assert_array_equal(got, again)


@pytest.mark.gpu
def test_unsummed_pieces_add_up_to_the_product(device: Device) -> None:
    """A multi-tensor update reads the pieces themselves: (splits, M * N), summing to
    the product, however many there are."""
    rng = np.random.default_rng(34)
    a = rng.standard_normal((6, 2000)).astype(np.float32)
    b = rng.standard_normal((2000, 5)).astype(np.float32)
    out = GpuArray.empty((6, 5), np.float32, device)
    pieces = matmul_into(
        MatrixView(to_gpu(a, device)), MatrixView(to_gpu(b, device)), out, TINY, 31,
        sum_pieces=False,
    )  # fmt: skip
    assert pieces is not None
    assert pieces.shape == (-(-125 // -(-125 // 31)), 30)  # 125 steps of 16 in 31 pieces
    np.testing.assert_allclose(pieces.numpy().sum(0).reshape(6, 5), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_a_grouped_convolution_weight_gradient_is_split_over_its_groups(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two groups of 2 -> 2 channels over 8 images of 12 x 12: a batch of two 2 x 18
    products, K = 8 * 144, each cut into pieces (the grid runs over groups x pieces)."""
    monkeypatch.setenv(tuning.ENV, "0")
    rng = np.random.default_rng(35)
    x = rng.standard_normal((8, 4, 12, 12)).astype(np.float32)
    gy = rng.standard_normal((8, 4, 12, 12)).astype(np.float32)
    op = get_op("conv2d_backward_weight")
    attrs = op.normalize_attrs({"padding": (1, 1), "kernel_size": (3, 3), "groups": 2})
    out_type = op.infer([TensorType(v.shape, "float32") for v in (x, gy)], attrs)
    seen = _labels(device, monkeypatch)
    got = lower("conv2d_backward_weight", [to_gpu(x, device), to_gpu(gy, device)], attrs,
                out_type).numpy()  # fmt: skip
    (groups,) = [g for label, g in seen if label.startswith(f"linalg_matmul {TINY}")]
    assert groups >= 2 * MAX_SPLITS  # 2 groups x at least MAX_SPLITS pieces each
    want = op.kernel(x.astype(np.float64), gy.astype(np.float64), **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_the_tuner_times_many_pieces_for_a_convolution_weight_gradient(
    device: Device, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """With tuning on, the gathered product of a long weight gradient is timed at K
    pieces beyond the old 16 (up to a fill of the GPU); whichever wins, the result is
    numpy's."""
    monkeypatch.setenv(tuning.ENV, "1")
    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "MIN_TUNED", 0)
    monkeypatch.setattr(tuning, "MAX_REPS", 1)
    monkeypatch.setattr(tuning, "ROUNDS", 1)
    tuning._CACHES.clear()
    try:
        rng = np.random.default_rng(36)
        x = rng.standard_normal((16, 1, 14, 14)).astype(np.float32)
        gy = rng.standard_normal((16, 4, 14, 14)).astype(np.float32)
        op = get_op("conv2d_backward_weight")
        attrs = op.normalize_attrs({"padding": (1, 1), "kernel_size": (3, 3)})
        out_type = op.infer([TensorType(v.shape, "float32") for v in (x, gy)], attrs)
        got = lower("conv2d_backward_weight", [to_gpu(x, device), to_gpu(gy, device)], attrs,
                    out_type).numpy()  # fmt: skip
        (path,) = (tmp_path / "gpu").glob("matmul-tiles-*.json")
        entries = json.loads(path.read_text())["entries"]
        (key,) = [k for k in entries if k.startswith("conv-backward_weight_m4_n12_k4096")]
        timed = [name.split("/") for name in entries[key]["us"]]
        assert any(t == TINY and int(s) > max(tuning.SPLITS) for t, s in timed)
    finally:
        tuning._CACHES.clear()
    want = op.kernel(x.astype(np.float64), gy.astype(np.float64), **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
