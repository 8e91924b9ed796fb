"""Convolution on the matmul tiles: tiles of each thread block (8x8, 8x4, 4x4 outputs
per thread, k8 and k16 steps, one and two buffers) and split-K on each of the three
products, against the ops' numpy kernels. (Every candidate's loaders and stores are
checked on plain products in test_matmul_tuning.py; the gathers are the same for all.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering import linalg, lower
from asgrad.tensor import TensorType, get_op

pytestmark = pytest.mark.gpu
Array = np.ndarray

TILES = [
    ("128x128_8x8_k16u", 1),
    ("128x64_8x4_k8du", 1),
    ("64x32_4x4_k8du", 1),
    ("32x32_4x4_k8d", 1),
    ("64x64_8x8_k8du", 3),
    # select()'s tiles for batches of narrow products (q: operands read along K staged
    # as 4x4 blocks, the loads being the convolution's gathers)
    ("256x64_16x4_k16qsu", 1),
    ("64x256_4x16_k16qsu", 1),
]

# x (N, C, H, W), w (O, C/G, kh, kw): groups, stride, padding and dilation together
X_SHAPE, W_SHAPE = (2, 6, 9, 8), (9, 2, 3, 2)
ATTRS = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 3}


def _check(device: Device, name: str, inputs: list[Array], attrs: dict[str, Any]) -> Array:
    op = get_op(name)
    attrs = op.normalize_attrs(attrs)
    out_type = op.infer([TensorType(x.shape, x.dtype.name) for x in inputs], attrs)
    got = lower(name, [to_gpu(x, device) for x in inputs], attrs, out_type).numpy()
    want = op.kernel(*[x.astype(np.float64) for x in inputs], **attrs)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale)
    return got


@pytest.mark.parametrize(("tile", "splits"), TILES)
def test_tiles_convolve(
    device: Device, monkeypatch: pytest.MonkeyPatch, tile: str, splits: int
) -> None:
    """Forward (with its bias as the epilogue: K whole), input gradient, transposed
    convolution with a bias, and weight gradient (K = N*OH*OW, split where asked)."""
    monkeypatch.setenv(tuning.ENV, "0")
    used: list[tuple[int, int, int, int]] = []

    def forced(M: int, N: int, K: int, nbatch: int, *rest: Any) -> tuple[str, int]:
        used.append((M, N, K, nbatch))
        return tile, splits

    monkeypatch.setattr(linalg, "select", forced)
    rng = np.random.default_rng(21)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    w = rng.standard_normal(W_SHAPE).astype(np.float32)
    bias = rng.standard_normal(W_SHAPE[0]).astype(np.float32)
    y = _check(device, "conv2d", [x, w, bias], ATTRS)
    gy = rng.standard_normal(y.shape).astype(np.float32)
    _check(device, "conv2d_backward_input", [gy, w, x], ATTRS)
    _check(device, "conv2d_backward_weight", [x, gy], {**ATTRS, "kernel_size": W_SHAPE[2:]})
    transposed = {**ATTRS, "output_padding": (1, 0)}
    _check(device, "conv_transpose2d", [gy, w, rng.standard_normal(6).astype(np.float32)],
           transposed)  # fmt: skip
    # the three products went through the tile: (M, N, K, batch) of each
    oh, ow = y.shape[2:]
    assert (3, oh * ow, 2 * 3 * 2, 2 * 3) in used
    assert (2, 9 * 8, 3 * 3 * 2, 2 * 3) in used
    assert (3, 2 * 3 * 2, 2 * oh * ow, 3) in used


def test_a_long_weight_gradient_is_split_and_summed(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "0")
    rng = np.random.default_rng(22)
    x = rng.standard_normal((8, 4, 24, 24)).astype(np.float32)
    gy = rng.standard_normal((8, 5, 24, 24)).astype(np.float32)
    attrs = {"padding": (1, 1), "kernel_size": (3, 3)}
    before = device.counter.dispatches
    _check(device, "conv2d_backward_weight", [x, gy], attrs)
    assert device.counter.dispatches - before == 2  # the pieces of K, then their sum


def test_a_batch_beyond_the_grid_runs_in_launches_of_fewer_images(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room in the grid for one image's groups at a time, each image is its own
    product, copied into place; the results are the same."""
    monkeypatch.setenv(tuning.ENV, "0")
    monkeypatch.setattr(device, "max_groups", 40)  # 40 // 16 pieces // 3 groups: 1 image
    rng = np.random.default_rng(23)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    w = rng.standard_normal(W_SHAPE).astype(np.float32)
    bias = rng.standard_normal(W_SHAPE[0]).astype(np.float32)
    copies = device.counter.device_copies
    y = _check(device, "conv2d", [x, w, bias], ATTRS)
    assert device.counter.device_copies - copies == X_SHAPE[0]
    gy = rng.standard_normal(y.shape).astype(np.float32)
    _check(device, "conv2d_backward_input", [gy, w, x], ATTRS)
    _check(device, "conv2d_backward_weight", [x, gy], {**ATTRS, "kernel_size": W_SHAPE[2:]})
