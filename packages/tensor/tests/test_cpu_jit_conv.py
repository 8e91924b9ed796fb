"""The compiled convolutions and max pooling against the numpy kernels (the reference).

The direct kernels (`asgrad.tensor.cpu.jit.kernels_conv`) run every geometry they
take (odd sizes, padding, dilation, groups, bias, ReLU) at float32 and float64 and
agree with the numpy kernels; the two gradients are checked in float64 as adjoints of
the forward kernel and by finite differences; NaN and infinities land where numpy's
land; stride 2 runs the numpy kernel. Every kernel the route may choose gives the same
bits, and a decision is read back from the cache folder (the route itself:
``test_cpu_jit_route.py``); a training graph compiled with the direct kernels forced
agrees with the numpy path, the ReLU is fused into the convolution's line and ReLU's
gradient into max pooling's only where nothing else can tell.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile, get_op
from asgrad.tensor.cpu import CPUExecutable, jit

pytest.importorskip("numba")

# After the skip: these import Numba.
from asgrad.tensor.cpu.jit import kernels_conv as kc
from asgrad.tensor.cpu.jit import kernels_pool as kp
from asgrad.tensor.cpu.jit.route import Route

CONV = get_op("conv2d").kernel
BACK_INPUT = get_op("conv2d_backward_input").kernel
BACK_WEIGHT = get_op("conv2d_backward_weight").kernel

# (x shape, w shape, attributes): every one stride 1, so the direct kernels take it.
GEOMETRIES: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ((2, 3, 7, 5), (5, 3, 3, 3), {"padding": (1, 1)}),
    ((1, 2, 6, 9), (3, 2, 3, 3), {}),
    ((3, 1, 5, 5), (6, 1, 3, 3), {"padding": (2, 2)}),
    ((1, 2, 8, 7), (7, 2, 2, 3), {"padding": (1, 0)}),
    ((2, 2, 9, 9), (4, 2, 3, 3), {"dilation": (2, 2), "padding": (2, 1)}),
    ((2, 4, 5, 6), (6, 2, 3, 3), {"groups": 2, "padding": (1, 1)}),
    ((1, 3, 6, 6), (3, 1, 3, 3), {"groups": 3, "padding": (1, 1)}),
    ((2, 5, 4, 4), (9, 5, 1, 1), {}),
    ((1, 1, 1, 1), (2, 1, 1, 1), {}),
    # Padding beyond the kernel's reach: more rows between stacked images than the
    # padding, and a pitch of the output's width (wider than a row and its padding).
    ((3, 2, 4, 6), (3, 2, 3, 3), {"padding": (3, 2)}),
    # Five images of 3 x 11 in chunks (three of them fill a chunk of the tall
    # plane at most), six output channels: a block of four and two one by one.
    ((5, 3, 3, 11), (6, 3, 2, 3), {"padding": (1, 2), "dilation": (2, 1)}),
]
IDS = [f"{list(x)}x{list(w)}{a}" for x, w, a in GEOMETRIES]


def _attrs(extra: dict[str, Any]) -> dict[str, Any]:
    return {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1, **extra}


def _tolerance(dtype: str) -> tuple[float, float]:
    return (1e-4, 1e-5) if dtype == "float32" else (1e-10, 1e-12)


def _operands(
    xs: tuple[int, ...], ws: tuple[int, ...], attrs: dict[str, Any], dtype: str, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    g = rng.standard_normal(CONV(x, w, **attrs).shape).astype(dtype)
    return x, w, b, g


@pytest.fixture
def direct() -> Iterator[None]:
    """The route pinned to the direct kernels."""
    kc.ROUTE.force = kp.ROUTE.force = "parallel"
    yield
    kc.ROUTE.force = kp.ROUTE.force = None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("xs", "ws", "extra"), GEOMETRIES, ids=IDS)
def test_direct_kernels_agree_with_numpy(
    xs: tuple[int, ...], ws: tuple[int, ...], extra: dict[str, Any], dtype: str
) -> None:
    attrs = _attrs(extra)
    x, w, b, g = _operands(xs, ws, attrs, dtype)
    rtol, atol = _tolerance(dtype)
    for bias in (None, b):
        want = CONV(x, w, bias, **attrs)
        got = kc.conv2d_direct(x, w, bias, **attrs)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        relu = kc.conv2d_direct(x, w, bias, relu=True, **attrs)
        np.testing.assert_allclose(relu, np.maximum(want, 0), rtol=rtol, atol=atol)
        assert not np.signbit(relu).any()
    if kc.input_applies(ws[2:], attrs["stride"], attrs["padding"], attrs["dilation"]):
        got_dx = kc.conv2d_backward_input_direct(g, w, x, **attrs)
        np.testing.assert_allclose(got_dx, BACK_INPUT(g, w, x, **attrs), rtol=rtol, atol=atol)
    got_dw = kc.conv2d_backward_weight_direct(x, g, kernel_size=ws[2:], **attrs)
    want_dw = BACK_WEIGHT(x, g, kernel_size=ws[2:], **attrs)
    np.testing.assert_allclose(got_dw, want_dw, rtol=rtol, atol=atol)


@pytest.mark.parametrize(("xs", "ws", "extra"), GEOMETRIES, ids=IDS)
def test_direct_gradients_are_the_adjoints_of_the_direct_forward_in_float64(
    xs: tuple[int, ...], ws: tuple[int, ...], extra: dict[str, Any]
) -> None:
    """<g, conv(x, w)> = <dx(g), x> = <dw(x, g), w>: the convolution is linear in each."""
    attrs = _attrs(extra)
    x, w, _, g = _operands(xs, ws, attrs, "float64", seed=1)
    y = kc.conv2d_direct(x, w, **attrs)
    total = float(np.vdot(g, y))
    dw = kc.conv2d_backward_weight_direct(x, g, kernel_size=ws[2:], **attrs)
    assert float(np.vdot(dw, w)) == pytest.approx(total, rel=1e-11, abs=1e-11)
    if kc.input_applies(ws[2:], attrs["stride"], attrs["padding"], attrs["dilation"]):
        dx = kc.conv2d_backward_input_direct(g, w, x, **attrs)
        assert float(np.vdot(dx, x)) == pytest.approx(total, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_forward_kernel_gives_the_same_bits_whatever_its_chunk_of_images(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work items split the tall plane into chunks of whole images: a pixel's sum
    runs in the same order whatever the chunk (one image, two with a shorter last
    chunk, or all), so the result is the same bits."""
    attrs = _attrs({"padding": (1, 1)})
    x, w, b, g = _operands((5, 6, 5, 4), (5, 6, 3, 3), attrs, dtype, seed=5)
    results = []
    for chunk in (1, 2 * 6 * 5, 10**6):  # an image is 6 rows (5 and a gap) of pitch 5
        monkeypatch.setattr(kc, "FORWARD_CHUNK", chunk)
        results.append((
            kc.conv2d_direct(x, w, b, relu=True, **attrs),
            kc.conv2d_backward_input_direct(g, w, x, **attrs),
        ))  # fmt: skip
    for forward, back in results[1:]:
        np.testing.assert_array_equal(forward, results[0][0])
        np.testing.assert_array_equal(back, results[0][1])
    np.testing.assert_allclose(
        results[0][0], np.maximum(CONV(x, w, b, **attrs), 0), *_tolerance(dtype)
    )


def test_direct_weight_gradient_matches_finite_differences_in_float64() -> None:
    attrs = _attrs({"padding": (1, 2), "dilation": (1, 2)})
    x, w, b, g = _operands((2, 3, 6, 7), (4, 3, 3, 2), attrs, "float64", seed=2)

    def loss(w_: np.ndarray) -> float:
        return float(np.vdot(g, kc.conv2d_direct(x, w_, b, relu=True, **attrs)))

    mask = kc.conv2d_direct(x, w, b, **attrs) > 0
    dw = kc.conv2d_backward_weight_direct(x, g * mask, kernel_size=(3, 2), **attrs)
    eps = 1e-6
    for index in [(0, 0, 0, 0), (1, 2, 1, 1), (3, 1, 2, 0), (2, 0, 1, 1)]:
        bump = np.zeros_like(w)
        bump[index] = eps
        numeric = (loss(w + bump) - loss(w - bump)) / (2 * eps)
        assert numeric == pytest.approx(dw[index], rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_infinities_land_where_numpy_puts_them(dtype: str) -> None:
    attrs = _attrs({"padding": (1, 1)})
    x, w, b, g = _operands((2, 2, 6, 5), (3, 2, 3, 3), attrs, dtype, seed=3)
    x[0, 1, 2, 4] = np.nan  # the last column: the wide rows' dropped columns read it
    x[1, 0, 5, 0] = np.inf
    g[1, 2, 0, 0] = np.nan
    with np.errstate(all="ignore"):
        pairs = [
            (kc.conv2d_direct(x, w, b, **attrs), CONV(x, w, b, **attrs)),
            (kc.conv2d_direct(x, w, b, relu=True, **attrs), np.maximum(CONV(x, w, b, **attrs), 0)),
            (kc.conv2d_backward_input_direct(g, w, x, **attrs), BACK_INPUT(g, w, x, **attrs)),
            (
                kc.conv2d_backward_weight_direct(x, g, kernel_size=(3, 3), **attrs),
                BACK_WEIGHT(x, g, kernel_size=(3, 3), **attrs),
            ),
        ]
    for got, want in pairs:
        assert np.isnan(want).any()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], *_tolerance(dtype))


def test_an_infinity_read_only_by_dropped_columns_leaves_those_taps_finite() -> None:
    """The wide layout multiplies the zeros of its dropped columns by real inputs: for
    the taps of the first kernel column, an infinity in the last input column is read
    only there, so numpy's weight gradient is finite for them and must stay so."""
    attrs = _attrs({})
    x, _, _, g = _operands((1, 1, 4, 6), (1, 1, 3, 3), attrs, "float32", seed=4)
    x[0, 0, 1, 5] = np.inf
    with np.errstate(all="ignore"):
        want = BACK_WEIGHT(x, g, kernel_size=(3, 3), **attrs)
        got = kc.conv2d_backward_weight_direct(x, g, kernel_size=(3, 3), **attrs)
    assert np.isfinite(want[..., 0]).all()
    assert not np.isfinite(want[..., 2]).all()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


def test_stride_two_and_large_padding_run_the_numpy_kernels(direct: None) -> None:
    attrs = _attrs({"stride": (2, 2), "padding": (1, 1)})
    x, w, b, g = _operands((2, 3, 7, 7), (4, 3, 3, 3), attrs, "float32", seed=5)
    np.testing.assert_array_equal(kc.conv2d(x, w, b, **attrs), CONV(x, w, b, **attrs))
    np.testing.assert_array_equal(
        kc.conv2d_backward_input(g, w, x, **attrs), BACK_INPUT(g, w, x, **attrs)
    )
    np.testing.assert_array_equal(
        kc.conv2d_backward_weight(x, g, kernel_size=(3, 3), **attrs),
        BACK_WEIGHT(x, g, kernel_size=(3, 3), **attrs),
    )
    wide = _attrs({"padding": (3, 3)})  # more than (k - 1) * dilation: no direct input gradient
    assert not kc.input_applies((3, 3), (1, 1), (3, 3), (1, 1))
    x2, w2, _, g2 = _operands((1, 2, 4, 4), (2, 2, 3, 3), wide, "float32", seed=6)
    np.testing.assert_array_equal(
        kc.conv2d_backward_input(g2, w2, x2, **wide), BACK_INPUT(g2, w2, x2, **wide)
    )


@pytest.mark.parametrize("force", ["parallel", "serial", "numpy"])
def test_each_routed_kernel_gives_the_convolution(force: str) -> None:
    attrs = _attrs({"padding": (1, 1)})
    x, w, b, g = _operands((2, 3, 6, 5), (4, 3, 3, 3), attrs, "float32", seed=9)
    kc.ROUTE.force = force
    try:
        got = [
            kc.conv2d(x, w, b, relu=True, **attrs),
            kc.conv2d_backward_input(g, w, x, **attrs),
            kc.conv2d_backward_weight(x, g, kernel_size=(3, 3), **attrs),
        ]
    finally:
        kc.ROUTE.force = None
    want = [
        np.maximum(CONV(x, w, b, **attrs), 0),
        BACK_INPUT(g, w, x, **attrs),
        BACK_WEIGHT(x, g, kernel_size=(3, 3), **attrs),
    ]
    for a, e in zip(got, want, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


# -- in a compiled training graph --------------------------------------------------------------
POOL = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
SHAPES = {
    "x": (2, 3, 10, 9),
    "w1": (4, 3, 3, 3),
    "w2": (5, 4, 3, 3),
    "b2": (5,),
    "gy": (2, 5, 5, 4),
}


def _run_net(on: bool, conv_out: bool, pool_grad_out: bool = False) -> tuple[list[np.ndarray], str]:
    """conv -> relu -> max pool -> conv (bias) -> relu, and its backward written out as
    the gradient rules write it (ReLU's mask a ``greater(x, 0)``), compiled with the
    compiled path ``on`` or off; the first convolution's value is an output too when
    ``conv_out``, the pooling's gradient when ``pool_grad_out``."""
    jit.set_enabled(on)
    try:
        g = Graph()
        x, w1, w2, b2, gy = (g.input(name, shape) for name, shape in SHAPES.items())
        attrs = _attrs({"padding": (1, 1)})
        zero = g.constant(0.0, "float32")
        c1 = g.apply("conv2d", [x, w1], attrs)
        r1 = c1.relu()
        p1 = g.apply("max_pool2d", [r1], POOL)
        c2 = g.apply("conv2d", [p1, w2, b2], attrs)
        r2 = c2.relu()
        d2 = g.apply("where", [g.apply("greater", [c2, zero]), gy, zero])
        dp1 = g.apply("conv2d_backward_input", [d2, w2, p1], attrs)
        dw2 = g.apply("conv2d_backward_weight", [p1, d2], {**attrs, "kernel_size": (3, 3)})
        dr1 = g.apply("max_pool2d_backward", [dp1, r1], POOL)
        d1 = g.apply("where", [g.apply("greater", [c1, zero]), dr1, zero])
        dw1 = g.apply("conv2d_backward_weight", [x, d1], {**attrs, "kernel_size": (3, 3)})
        extra = [*([c1] if conv_out else []), *([dr1] if pool_grad_out else [])]
        program = compile([r2, dp1, dw2, dw1, *extra])
        rng = np.random.default_rng(7)
        feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
        got = list(program(feeds))
        assert isinstance(program.executable, CPUExecutable)
        (fn,) = program.executable._fns.values()
        return got, fn.source
    finally:
        jit.set_enabled(None)


@pytest.mark.parametrize("conv_out", [False, True])
def test_a_compiled_conv_net_agrees_with_the_numpy_path(direct: None, conv_out: bool) -> None:
    got, source = _run_net(True, conv_out)
    want, numpy_source = _run_net(False, conv_out)
    assert "_conv_relu" not in numpy_source
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    lines = source.splitlines()
    fused = [line for line in lines if "_conv_relu" in line]
    # The second convolution's ReLU is in its kernel; the first's too, unless its
    # value is an output (which must stay the convolution's, not the ReLU's).
    assert len(fused) == (1 if conv_out else 2), source
    assert sum(" = jk" in line for line in lines) >= 3  # the gradients and the pooling
    # The first ReLU's gradient is in the pooling's gradient kernel (on c1's mask, or
    # on relu(c1) > 0 where c1 is an output), and its mask's line is gone.
    assert sum("_pool_relu_backward" in line for line in lines) == 1, source
    # Fewer lines of ops than the numpy path (the step's bookkeeping line aside).
    ops = [line for line in lines if line.strip() != "_new_step()"]
    assert len(ops) < len(numpy_source.splitlines())


def test_a_pooling_gradient_that_is_an_output_keeps_its_own_line(direct: None) -> None:
    got, source = _run_net(True, False, pool_grad_out=True)
    want, _ = _run_net(False, False, pool_grad_out=True)
    assert "_pool_relu_backward" not in source
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((2, 3, 8, 6), POOL),
        ((1, 2, 9, 6), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (0, 0)}),
        ((1, 2, 7, 5), POOL),  # a remainder: not tiled
        ((1, 2, 6, 6), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
        ((2, 1, 6, 9), {"kernel_size": (2, 3), "stride": (2, 3), "padding": (0, 0)}),
        ((1, 1, 4, 4), {"kernel_size": (1, 1), "stride": (1, 1), "padding": (0, 0)}),
    ],
)
def test_compiled_max_pooling_agrees_with_numpy_with_ties_and_nan(
    shape: tuple[int, ...], attrs: dict[str, Any], dtype: str
) -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(-2, 2, shape).astype(dtype)  # many ties in every window
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[3::11] = -np.inf
    want = get_op("max_pool2d").kernel(x, **attrs)
    np.testing.assert_array_equal(kp.max_pool2d_direct(x, **attrs), want)
    g = rng.standard_normal(want.shape).astype(dtype)
    g.reshape(-1)[::5] = -0.0
    want_dx = get_op("max_pool2d_backward").kernel(g, x, **attrs)
    got_dx = kp.max_pool2d_backward_direct(g, x, **attrs)
    tiled = attrs["kernel_size"] == attrs["stride"] and all(
        size % k == 0 for size, k in zip(shape[2:], attrs["kernel_size"], strict=True)
    )
    if tiled:  # each element written once: bit for bit, signed zeros included
        np.testing.assert_array_equal(got_dx, want_dx)
        np.testing.assert_array_equal(np.signbit(got_dx), np.signbit(want_dx))
    else:  # overlapping windows add in another order
        np.testing.assert_allclose(got_dx, want_dx, rtol=1e-6, atol=1e-6)
    # A ReLU's gradient after it, in the same pass: where(x > 0, dx, 0) bit for bit
    masked = np.where(x > 0, got_dx, 0).astype(dtype)
    fused = kp.max_pool2d_backward_direct(g, x, positive=True, **attrs)
    np.testing.assert_array_equal(fused, masked)
    np.testing.assert_array_equal(np.signbit(fused), np.signbit(masked))
    kp.ROUTE.force = "numpy"
    try:
        routed = kp.max_pool2d_backward(g, x, positive=True, **attrs)
    finally:
        kp.ROUTE.force = None
    np.testing.assert_array_equal(routed, np.where(x > 0, want_dx, 0).astype(dtype))


def test_a_convolution_computes_the_same_bits_whatever_its_route_measures() -> None:
    """The route's choice depends on timing, so its candidates must agree bit for bit:
    the calls that measure and every call after return one result, the direct kernel's
    (numpy's im2col rounds differently, so it is no candidate unless forced)."""
    attrs = _attrs({"padding": (1, 1)})
    x, w, b, _ = _operands((2, 3, 6, 5), (4, 3, 3, 3), attrs, "float32", seed=4)
    saved, kc.ROUTE = kc.ROUTE, Route("conv", persist=False)
    try:
        results = [kc.conv2d(x, w, b, **attrs) for _ in range(5)]
        assert set(kc.ROUTE.describe().values()) <= {"parallel", "serial"}
        kc.ROUTE.force = "parallel"
        direct = kc.conv2d(x, w, b, **attrs)
    finally:
        kc.ROUTE = saved
    for r in results:
        np.testing.assert_array_equal(r, direct)


def test_a_convolutions_route_is_read_back_from_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later process (a fresh route) takes the threads' decision written by the first
    one and runs that kernel without measuring; the result is the same bits. (The
    measured decision is then set to the threads: one thread's would be measured again.)"""
    from asgrad.tensor.cpu.jit import route as rt

    monkeypatch.setenv("ASGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(rt.ENV, raising=False)
    attrs = _attrs({"padding": (1, 1)})
    x, w, b, _ = _operands((2, 3, 6, 5), (4, 3, 3, 3), attrs, "float32", seed=5)
    saved = kc.ROUTE
    try:
        kc.ROUTE = Route("conv")
        first = [kc.conv2d(x, w, b, **attrs) for _ in range(rt.TRIALS)]
        (key,) = kc.ROUTE.measured
        assert (tmp_path / rt.FILE).exists()
        kc.ROUTE.decided(key, "parallel")
        kc.ROUTE = Route("conv")
        again = kc.conv2d(x, w, b, **attrs)
        assert kc.ROUTE.describe() == {key: "parallel"}
        assert not kc.ROUTE.measured
    finally:
        kc.ROUTE = saved
    for r in first:
        np.testing.assert_array_equal(r, again)
