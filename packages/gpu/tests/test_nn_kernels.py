"""The nn kernels (convolution, pooling, norms, dropout) against their numpy kernels.

Shapes the registry's parity cases do not reach: odd sizes, groups, stride 2, more
channels and pixels than one 64x64 tile or one 256-thread workgroup, rows longer than
a workgroup, and launches folded over a 2-D grid (forced with a tiny group limit).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering import lower
from asgrad.tensor import TensorType, get_op
from asgrad.tensor.ops.random import dropout_keep

pytestmark = pytest.mark.gpu
Array = np.ndarray


def _run(device: Device, name: str, inputs: list[Array], attrs: dict[str, Any]) -> Array:
    """The GPU result of op ``name``, checked against its numpy kernel."""
    op = get_op(name)
    attrs = op.normalize_attrs(attrs)  # every attribute, as a node holds them
    out_type = op.infer([TensorType(x.shape, x.dtype.name) for x in inputs], attrs)
    got = lower(name, [to_gpu(x, device) for x in inputs], attrs, out_type).numpy()
    want = op.kernel(*[x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs], **attrs)
    assert got.shape == tuple(out_type.shape)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale)
    return got


def _randn(rng: np.random.Generator, *shape: int) -> Array:
    return rng.standard_normal(shape).astype(np.float32)


CONV_CASES = [
    # x shape, w shape, attrs
    (
        (3, 6, 13, 11),
        (9, 2, 3, 5),
        {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 3},
    ),
    ((2, 5, 9, 10), (70, 5, 3, 3), {"stride": (1, 1), "padding": (1, 1)}),  # 2 m-tiles
    ((1, 3, 17, 19), (4, 3, 4, 4), {"stride": (2, 2), "padding": (2, 1)}),  # > 1 n-tile
    ((2, 8, 7, 7), (8, 1, 3, 3), {"stride": (2, 2), "padding": (1, 1), "groups": 8}),
    ((2, 20, 5, 6), (7, 20, 1, 1), {}),  # K = 20: two partial k-tiles
]


def _conv_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1, **attrs}


@pytest.mark.parametrize(("xs", "ws", "attrs"), CONV_CASES)
def test_conv2d_forward_and_backward(
    device: Device, xs: tuple[int, ...], ws: tuple[int, ...], attrs: dict[str, Any]
) -> None:
    rng = np.random.default_rng(3)
    a = _conv_attrs(attrs)
    x, w, b = _randn(rng, *xs), _randn(rng, *ws), _randn(rng, ws[0])
    y = _run(device, "conv2d", [x, w, b], a)
    g = _randn(rng, *y.shape)
    _run(device, "conv2d_backward_input", [g, w, x], a)
    _run(device, "conv2d_backward_weight", [x, g], {**a, "kernel_size": ws[2:]})


@pytest.mark.parametrize(
    ("xs", "ws", "attrs"),
    [
        (
            (2, 6, 5, 7),
            (6, 2, 3, 3),
            {"stride": (2, 2), "padding": (1, 1), "groups": 3, "output_padding": (1, 0)},
        ),
        ((1, 3, 9, 9), (3, 70, 2, 2), {"stride": (2, 2)}),
    ],
)
def test_conv_transpose2d(
    device: Device, xs: tuple[int, ...], ws: tuple[int, ...], attrs: dict[str, Any]
) -> None:
    rng = np.random.default_rng(4)
    a = {"output_padding": (0, 0), **_conv_attrs(attrs)}
    x, w = _randn(rng, *xs), _randn(rng, *ws)
    _run(device, "conv_transpose2d", [x, w, _randn(rng, ws[1] * a["groups"])], a)


POOL_CASES = [
    ((2, 3, 17, 15), {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ((1, 5, 12, 13), {"kernel_size": (2, 4), "stride": (2, 3), "padding": (1, 2)}),
    ((3, 2, 9, 8), {"kernel_size": (3, 2), "stride": (1, 1), "padding": (0, 0)}),
]


@pytest.mark.parametrize(("xs", "attrs"), POOL_CASES)
def test_max_pool_family(device: Device, xs: tuple[int, ...], attrs: dict[str, Any]) -> None:
    rng = np.random.default_rng(5)
    size = int(np.prod(xs))
    x = (rng.permutation(size).astype(np.float32) * 0.01).reshape(xs)  # distinct values
    y = _run(device, "max_pool2d", [x], attrs)
    _run(device, "max_pool2d_backward", [_randn(rng, *y.shape), x], attrs)
    _run(device, "max_pool2d_select", [_randn(rng, *xs), x], attrs)


def test_max_pool_ties_take_the_first(device: Device) -> None:
    x = np.zeros((1, 2, 6, 6), np.float32)
    x[0, 1, 2:4, 2:4] = 1.0
    attrs = {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}
    _run(device, "max_pool2d_backward", [np.ones((1, 2, 6, 6), np.float32), x], attrs)


@pytest.mark.parametrize(("xs", "attrs"), POOL_CASES)
@pytest.mark.parametrize("include", [True, False])
def test_avg_pool(
    device: Device, xs: tuple[int, ...], attrs: dict[str, Any], include: bool
) -> None:
    rng = np.random.default_rng(6)
    a = {**attrs, "count_include_pad": include}
    x = _randn(rng, *xs)
    y = _run(device, "avg_pool2d", [x], a)
    _run(device, "avg_pool2d_backward", [_randn(rng, *y.shape), x], a)


@pytest.mark.parametrize(
    ("xs", "out"), [((2, 3, 13, 10), (4, 3)), ((1, 2, 5, 7), (7, 9)), ((2, 4, 9, 9), (9, 9))]
)
def test_adaptive_avg_pool(device: Device, xs: tuple[int, ...], out: tuple[int, int]) -> None:
    rng = np.random.default_rng(7)
    x = _randn(rng, *xs)
    _run(device, "adaptive_avg_pool2d", [x], {"output_size": out})
    g = _randn(rng, *xs[:2], *out)
    _run(device, "adaptive_avg_pool2d_backward", [g, x], {"output_size": out})


@pytest.mark.parametrize(("shape", "norm"), [((7, 513), (513,)), ((3, 4, 9, 31), (9, 31))])
def test_layer_norm_long_rows(
    device: Device, shape: tuple[int, ...], norm: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(8)
    x = _randn(rng, *shape) * 3.0 + 2.0
    w, b = _randn(rng, *norm), _randn(rng, *norm)
    attrs = {"normalized_shape": norm, "eps": 1e-5}
    _run(device, "layer_norm", [x, w, b], attrs)
    _run(device, "layer_norm", [x], attrs)
    g = _randn(rng, *shape)
    _run(device, "layer_norm_backward", [g, x, w], attrs)
    _run(device, "layer_norm_backward", [g, x], attrs)


@pytest.mark.parametrize("shape", [(37, 5), (6, 3, 11, 9), (300, 2, 3)])
def test_batch_norm_many_elements_per_channel(device: Device, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(9)
    x = _randn(rng, *shape) * 2.0 - 1.0
    c = shape[1]
    w, b = _randn(rng, c), _randn(rng, c)
    attrs = {"eps": 1e-5}
    _run(device, "batch_norm", [x, w, b], attrs)
    _run(device, "batch_norm", [x], attrs)
    g = _randn(rng, *shape)
    _run(device, "batch_norm_backward", [g, x, w], attrs)
    _run(device, "batch_norm_backward", [g, x], attrs)


@pytest.mark.parametrize("seed", [0, 1, -1, 12345, -7, 2**31 - 1, -(2**31)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_mask_is_bit_identical(device: Device, seed: int, p: float) -> None:
    shape = (3, 257, 5)  # not a multiple of the workgroup
    x = np.ones(shape, np.float32)
    attrs = {"p": p}
    got = _run(device, "dropout", [x, np.array(seed, np.int64)], attrs)
    np.testing.assert_array_equal(got != 0, dropout_keep(shape, seed, p))
    got32 = _run(device, "dropout", [x, np.array(seed, np.int32)], attrs)
    np.testing.assert_array_equal(got32, got)


def test_folded_launches(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a tiny per-dimension group limit every nn kernel folds its grid into 2-D."""
    monkeypatch.setattr(device, "max_groups", 16)
    rng = np.random.default_rng(10)
    x, w = _randn(rng, 3, 6, 11, 13), _randn(rng, 70, 6, 3, 3)
    a = _conv_attrs({"padding": (1, 1)})
    y = _run(device, "conv2d", [x, w], a)  # 2 m-tiles x 3 n-tiles x 3 images: 18 tiles
    _run(device, "conv2d_backward_input", [_randn(rng, *y.shape), w, x], a)
    xp = _randn(rng, 4, 6, 16, 16)
    pool = {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)}
    _run(device, "max_pool2d", [xp], pool)  # 4*6*17*17 outputs: 28 workgroups
    _run(device, "avg_pool2d_backward", [_randn(rng, 4, 6, 17, 17), xp], pool)
    _run(device, "layer_norm", [x], {"normalized_shape": (13,), "eps": 1e-5})  # 198 rows
    big = np.ones((5000,), np.float32)  # 20 workgroups
    got = _run(device, "dropout", [big, np.array(3, np.int64)], {"p": 0.25})
    np.testing.assert_array_equal(got != 0, dropout_keep(big.shape, 3, 0.25))


def test_split_k_for_long_reductions(device: Device) -> None:
    """Few output tiles and a long K: the reduction is split and the slices summed."""
    rng = np.random.default_rng(11)
    x, w = _randn(rng, 8, 2, 24, 24), _randn(rng, 3, 2, 3, 3)
    a = _conv_attrs({})
    y = _run(device, "conv2d", [x, w], a)
    g = _randn(rng, *y.shape)
    _run(device, "conv2d_backward_weight", [x, g], {**a, "kernel_size": (3, 3)})  # K = 3872
    x2, w2 = _randn(rng, 1, 130, 4, 4), _randn(rng, 5, 130, 3, 3)
    _run(device, "conv2d", [x2, w2], a)  # K = 1170 over one tile
