"""Matmul tiles (generated kernels, split-K, batch folding, the selection rule) and the
block column reduction, against numpy on the test adapter (lavapipe in CI)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, to_gpu
from asgrad.gpu.device.array import Operand
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.gpu.lowering.linalg import (
    BATCH_TALL,
    BATCH_WIDE,
    FEW,
    LARGE,
    LARGE_KN,
    LARGE_T,
    MEDIUM,
    SHALLOW,
    SMALL,
    Epilogue,
    MatrixView,
    matmul,
    matmul_into,
    select,
)
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.tensor.ir import scalar as s

pytestmark = pytest.mark.gpu
Array = np.ndarray

# The rule's tiles that the tuner does not time, the loop variants (one buffer, not
# unrolled), and LARGE and LARGE_KN for every layout (the tuner's candidates are each proven at two
# layouts in test_matmul_tuning.py; the loaders of a layout are the same for all tiles).
TILES = [LARGE, LARGE_KN, MEDIUM, SMALL, "64x128_4x8_k8", "64x64_4x4_k16d"]


def _view(device: Device, x: Array, transposed: bool) -> MatrixView:
    if transposed:  # stored transposed, read through swapped strides
        return MatrixView(to_gpu(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device)).transpose()
    return MatrixView(to_gpu(x, device))


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize(
    ("a_shape", "b_shape", "transpose", "splits"),
    [
        ((67, 37), (37, 129), (False, False), 1),  # odd sizes, K not a multiple of BK
        ((40, 64), (64, 36), (False, False), 1),  # aligned: vec4 reads
        ((40, 64), (64, 36), (True, True), 1),  # aligned, both read transposed
        ((33, 20), (20, 17), (True, False), 1),
        ((3, 20, 40), (40, 12), (False, True), 1),  # batch folded into M
        ((2, 1, 9, 30), (3, 30, 8), (False, False), 1),  # batch dims broadcast both ways
        ((24, 300), (300, 20), (True, False), 3),  # split-K, uneven pieces
        ((2, 5, 70), (2, 70, 6), (False, False), 2),  # split-K of a batch
    ],
)
def test_tile_matches_numpy(
    device: Device,
    tile: str,
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    transpose: tuple[bool, bool],
    splits: int,
) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    va, vb = _view(device, a, transpose[0]), _view(device, b, transpose[1])
    got = matmul(va, vb, tile, splits).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_split_k_is_one_product_and_one_sum(device: Device) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((16, 1000)).astype(np.float32)
    b = rng.standard_normal((1000, 8)).astype(np.float32)
    out = GpuArray.empty((16, 8), np.float32, device)
    before = device.counter.dispatches
    matmul_into(MatrixView(to_gpu(a, device)), MatrixView(to_gpu(b, device)), out, SMALL, 4)
    assert device.counter.dispatches - before == 2
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-3)


def test_empty_k_gives_zeros(device: Device) -> None:
    a = to_gpu(np.zeros((3, 0), np.float32), device)
    b = to_gpu(np.zeros((0, 5), np.float32), device)
    np.testing.assert_array_equal(matmul(a, b).numpy(), np.zeros((3, 5), np.float32))


def test_select_picks_per_shape() -> None:
    assert select(4096, 4096, 4096, 1) == (LARGE_KN, 1)
    assert tiles.tile(LARGE_KN).shared <= 8192  # so it runs wherever LARGE does
    assert select(8192, 512, 2048, 1, layouts=("k", "k")) == (LARGE_T, 1)
    # a deep K with few output tiles is cut into as many pieces as keep the workgroups
    # within FILL_GROUPS (a transformer's weight gradients: 64, 48 and 16 tiles)
    assert select(512, 2048, 8192, 1, layouts=("m", "n")) == (LARGE_T, 4)
    assert select(512, 1536, 8192, 1, layouts=("m", "n")) == (LARGE_T, 5)
    assert select(512, 512, 8192, 1, layouts=("m", "n")) == (LARGE_T, 16)
    # attention heads (tiles over a whole 64-wide output where 20 KiB of workgroup
    # memory is granted), a product too small for 128x128 tiles to fill the GPU, small ones
    assert select(256, 64, 256, 256) == (SHALLOW, 1)
    assert select(256, 64, 256, 256, 32768, ("m", "n")) == (BATCH_TALL, 1)
    assert select(64, 256, 256, 256, 32768, ("m", "n")) == (BATCH_WIDE, 1)
    assert select(256, 256, 64, 256, layouts=("k", "k")) == (SHALLOW, 1)
    assert select(1024, 1024, 1024, 1) == (FEW, 1)
    assert select(64, 128, 64, 1) == (MEDIUM, 1)
    assert select(5, 3, 7, 1) == (SMALL, 1)
    assert select(5, 36, 4608, 1)[1] > 1  # tiny output, long K: split
    # never a tile that needs more workgroup memory than the device allows
    for args in ((4096, 4096, 4096, 1), (1024, 1024, 1024, 1), (512, 512, 8192, 1)):
        assert tiles.tile(select(*args, max_shared=8192)[0]).shared <= 8192


def test_tile_names_are_checked(device: Device) -> None:
    assert tiles.tile("128").name == "128x128_8x8_k8"
    assert tiles.tile("64x64_8x8_k8du") == tiles.Tile(64, 64, 8, 8, 8, True, True)
    wide = tiles.tile("128x256_8x16_k8dpu_w8")
    assert wide == tiles.Tile(128, 256, 8, 16, 8, True, True, True, 8)
    assert (wide.wx, wide.wy, wide.name) == (16, 16, "128x256_8x16_k8dpu_w8")
    for bad in (
        "128x128",
        "128x128_6x8_k8",
        "64x64_4x4_k6",
        "64x64_4x4_k8x",
        "128x128_8x8_k8pu",  # constant buffer indexes need two buffers
        "128x128_8x8_k8du_w3",  # subgroups over 3 x 32/3 threads
        "64x64_8x8_k8du_w16",  # 16 threads wide, of 8 in a row
        "128x128_8x8_k8du_x8",
    ):
        with pytest.raises(GpuUnsupportedError, match=r"BMxBN_TMxTN_kBK|TM and TN"):
            tiles.tile(bad)
    a = to_gpu(np.ones((4, 4), np.float32), device)
    with pytest.raises(GpuUnsupportedError, match="workgroup memory"):
        matmul(a, a, "128x128_8x8_k32d")


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((3000, 100), 0), ((300, 64), 0), ((5, 77, 40), 1), ((7, 200, 50), (0, 1)), ((40, 3, 70), 0)],
)
def test_block_column_reduction_matches_numpy(
    device: Device, shape: tuple[int, ...], axis: int | tuple[int, ...]
) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    gx = to_gpu(x, device)
    for kind, want in (
        ("sum", x.sum(axis)),
        ("mean", x.mean(axis)),
        ("max", x.max(axis)),
        ("min", x.min(axis)),
    ):
        got = reduce_axis(kind, gx, axis).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=kind)
    xi = rng.integers(-(2**20), 2**20, shape).astype(np.int32)
    got_i = reduce_axis("sum", to_gpu(xi, device), axis, out_dtype=np.int32).numpy()
    np.testing.assert_array_equal(got_i, xi.sum(axis))


def test_block_column_reduction_lets_nan_win(device: Device) -> None:
    x = np.random.default_rng(6).standard_normal((500, 64)).astype(np.float32)
    x[17, 5] = np.nan
    got = reduce_axis("max", to_gpu(x, device), 0).numpy()
    assert np.isnan(got[5])
    assert np.isnan(got).sum() == 1
    np.testing.assert_array_equal(np.delete(got, 5), np.delete(x.max(0), 5))


@pytest.mark.parametrize("tile", [None, LARGE, SMALL])
def test_epilogue_adds_a_bias_and_applies_an_activation(device: Device, tile: str | None) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 21, 30)).astype(np.float32)
    w = rng.standard_normal((30, 37)).astype(np.float32)
    bias = rng.standard_normal(37).astype(np.float32)
    scale = np.array([0.5], np.float32)
    out = GpuArray.empty((3, 21, 37), np.float32, device)
    before = device.counter.dispatches
    expr = s.maximum(s.arg(0) + s.arg(1), 0.0) * s.arg(2)
    epilogue = Epilogue(expr, [to_gpu(bias, device), to_gpu(scale, device)])
    matmul_into(_view(device, x, False), _view(device, w, True), out, tile, 4, epilogue)
    assert device.counter.dispatches - before == 1  # no split-K, no second pass
    want = np.maximum(x @ w + bias, 0.0) * 0.5
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", [None, SMALL])
def test_epilogue_reads_operands_broadcast_through_strides(
    device: Device, tile: str | None
) -> None:
    """A residual of the output's shape, a row vector, a transposed view and a bool
    mask, each read at the product's element; a subexpression read twice."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 9, 12)).astype(np.float32)
    w = rng.standard_normal((12, 10)).astype(np.float32)
    residual = rng.standard_normal((2, 9, 10)).astype(np.float32)
    rows = rng.standard_normal((9, 1)).astype(np.float32)
    t = rng.standard_normal((10, 9)).astype(np.float32)  # read as its transpose
    mask = rng.random((2, 1, 10)) > 0.5
    t_view = Operand.of(to_gpu(t, device)).permute((1, 0))
    operands: list[GpuArray | Operand] = [to_gpu(residual, device), to_gpu(rows, device)]
    operands += [t_view, to_gpu(mask, device)]
    shared = s.tanh(s.arg(0) * s.arg(2))
    expr = s.where(s.arg(4), shared * shared + s.arg(1), s.arg(3) - shared)
    out = GpuArray.empty((2, 9, 10), np.float32, device)
    matmul_into(_view(device, x, False), _view(device, w, False), out, tile, None,
                Epilogue(expr, operands))  # fmt: skip
    p = np.tanh((x @ w) * rows)
    want = np.where(mask, p * p + residual, t.T - p)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_epilogue_operands_are_checked(device: Device) -> None:
    a = to_gpu(np.ones((4, 6), np.float32), device)
    out = GpuArray.empty((4, 4), np.float32, device)
    wrong = to_gpu(np.ones(6, np.float32), device)
    with pytest.raises(GpuUnsupportedError, match="does not broadcast"):
        matmul_into(
            MatrixView(a), MatrixView(a).transpose(), out, epilogue=Epilogue(s.arg(1), [wrong])
        )
    many = Epilogue(s.arg(0), [a] * 6)
    with pytest.raises(GpuUnsupportedError, match="at most 5 operands"):
        matmul_into(MatrixView(a), MatrixView(a).transpose(), out, epilogue=many)
