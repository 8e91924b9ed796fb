"""Scatter-add (gather's gradient) with a workgroup per output row.

Rows of 16 or more elements (an embedding table's gradient) take
``kernels/index_scatter_add_rows.wgsl``; narrower ones the thread-per-element kernel.
Both add the matching rows of the gradient in index order, so each equals numpy's
sequential ``np.add.at`` bit for bit, and the same inputs give the same bits every run.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering.index import scatter_add, scatter_add_form
from asgrad.tensor import OutOfRangeError

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(7)


def _reference(g: np.ndarray, idx: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """numpy's sequential scatter-add: out[o, idx[p], j] += g[o, p, j] in order p."""
    outer, length = int(np.prod(shape[:axis])), shape[axis]
    out = np.zeros((outer, length, int(np.prod(shape[axis + 1 :]))), np.float32)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as on the GPU
        np.add.at(out, (slice(None), idx.reshape(-1)), g.reshape(outer, idx.size, out.shape[2]))
    return out.reshape(shape)


def _scatter(
    device: Device, g: np.ndarray, idx: np.ndarray, shape: tuple[int, ...], axis: int
) -> np.ndarray:
    return scatter_add(to_gpu(g, device), to_gpu(idx, device), shape, axis).numpy()


@pytest.mark.parametrize(
    ("rows", "n_idx", "width"),
    [
        (7, 40, 16),  # the narrowest row the row kernel takes
        (5, 3, 67),  # an odd width: a second, partly idle column block
        (9, 1100, 130),  # more indices than one chunk of 512, a tail chunk
        (64, 1024, 128),  # the transformer workload's embedding gradient
    ],
)
def test_row_kernel_equals_numpy_add_at_bit_for_bit(
    device: Device, rows: int, n_idx: int, width: int
) -> None:
    assert scatter_add_form(1, rows, n_idx, width) == "rows"
    idx = RNG.integers(0, rows, n_idx).astype(np.int32)  # repeated, out of order
    g = RNG.standard_normal((n_idx, width)).astype(np.float32)
    got = _scatter(device, g, idx, (rows, width), 0)
    np.testing.assert_array_equal(got, _reference(g, idx, (rows, width), 0))


def test_rows_no_index_hits_are_zero_and_one_row_takes_every_index(device: Device) -> None:
    idx = np.array([5] * 700 + [2, 5, 2], np.int32)  # rows 0, 1, 3, 4, 6 never hit
    g = RNG.standard_normal((idx.size, 33)).astype(np.float32)
    got = _scatter(device, g, idx, (7, 33), 0)
    np.testing.assert_array_equal(got, _reference(g, idx, (7, 33), 0))
    assert not got[[0, 1, 3, 4, 6]].any()


def test_row_kernel_on_an_inner_axis_with_blocks_before_it(device: Device) -> None:
    # shape (3, 6, 20), axis 1: three blocks, each scatter-added with the same indices
    idx = np.array([[4, 0, 4], [5, 4, 1]], np.int32)
    g = RNG.standard_normal((3, 2, 3, 20)).astype(np.float32)
    got = _scatter(device, g, idx, (3, 6, 20), 1)
    np.testing.assert_array_equal(got, _reference(g, idx, (3, 6, 20), 1))


def test_row_kernel_gives_the_same_bits_every_run(device: Device) -> None:
    idx = RNG.integers(0, 4, 2000).astype(np.int32)
    g = (RNG.standard_normal((2000, 48)) * 1e4).astype(np.float32)  # rounding depends on order
    first = _scatter(device, g, idx, (4, 48), 0)
    for _ in range(3):
        np.testing.assert_array_equal(_scatter(device, g, idx, (4, 48), 0), first)


def test_row_kernel_propagates_nan_and_inf(device: Device) -> None:
    idx = np.array([1, 0, 1, 1], np.int32)
    g = np.ones((4, 16), np.float32)
    g[0, 3], g[2, 3] = np.inf, -np.inf  # inf - inf: NaN
    g[1, 5] = np.nan
    g[3, 7] = np.inf
    got = _scatter(device, g, idx, (3, 16), 0)
    np.testing.assert_array_equal(got, _reference(g, idx, (3, 16), 0))
    assert np.isnan(got[1, 3])
    assert np.isnan(got[0, 5])
    assert got[1, 7] == np.inf


def test_row_kernel_raises_for_an_index_out_of_range_and_adds_nothing(device: Device) -> None:
    idx = np.array([1, 10, -1, 1], np.int32)
    g = np.ones((4, 32), np.float32)
    out = scatter_add(to_gpu(g, device), to_gpu(idx, device), (10, 32), 0)
    with pytest.raises(
        OutOfRangeError, match=r"^scatter_add: indices from -1 to 10 .*\(2 elements\)"
    ):
        out.numpy()
    want = np.zeros((10, 32), np.float32)
    want[1] = 2.0
    np.testing.assert_array_equal(out.numpy(), want)


def test_narrow_rows_keep_the_thread_per_element_kernel(device: Device) -> None:
    assert scatter_add_form(1, 10, 1000, 4) == "elements"
    idx = RNG.integers(0, 10, 1000).astype(np.int32)
    g = RNG.standard_normal((1000, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        _scatter(device, g, idx, (10, 4), 0), _reference(g, idx, (10, 4), 0)
    )
