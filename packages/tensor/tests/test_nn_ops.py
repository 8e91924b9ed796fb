"""The neural-network ops (convolution, pooling, norms, dropout) against slow references.

Every registry case of every op in ``NN_REFERENCES`` is run through a compiled graph
in float64 and float32 and compared with a loop implementation written here from
the definitions (windows, scatters, explicit Jacobians, a scalar hash), not from
the vectorised kernels. Then the shape rules' errors, the functional wrappers and
the dropout hash, whose values are pinned for the GPU twin.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asgrad.tensor import (
    DTypeError,
    Graph,
    GraphError,
    OpCase,
    OpDef,
    ShapeError,
    Variable,
    all_ops,
    compile,
    get_op,
)
from asgrad.tensor.api.nn_functional import (
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv2d,
    conv_transpose2d,
    dropout,
    embedding,
    layer_norm,
    max_pool2d,
)
from asgrad.tensor.ops.random import dropout_keep, dropout_key, pcg_hash

Reference = Callable[..., np.ndarray]
Attrs = dict[str, Any]


# -- reference implementations: loops over windows, straight from the definitions ------
def _p(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _padded(x: np.ndarray, pad: tuple[int, int], value: float = 0.0) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2), constant_values=value)


def _conv_geometry(attrs: Attrs) -> tuple[tuple[int, int], ...]:
    return (_p(attrs["stride"]), _p(attrs["padding"]), _p(attrs["dilation"]))


def _conv_window(y: int, x: int, k: tuple[int, int], attrs: Attrs) -> tuple[Any, ...]:
    """Index of the window of output pixel (y, x) in a channel slice (C, Hp, Wp)."""
    (sh, sw), _, (dh, dw) = _conv_geometry(attrs)
    rows = np.array([y * sh + i * dh for i in range(k[0])])
    cols = np.array([x * sw + j * dw for j in range(k[1])])
    return (slice(None), rows[:, None], cols[None, :])


def ref_conv2d(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    (sh, sw), pad, (dh, dw) = _conv_geometry(attrs)
    groups = attrs["groups"]
    n_, _c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * pad[0] - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pad[1] - dw * (kw - 1) - 1) // sw + 1
    xp = _padded(x, pad)
    out = np.zeros((n_, o, oh, ow))
    for n in range(n_):
        for oc in range(o):
            grp = oc // (o // groups)
            chans = range(grp * cg, (grp + 1) * cg)
            for y in range(oh):
                for xx in range(ow):
                    window = xp[n, chans.start : chans.stop][_conv_window(y, xx, (kh, kw), attrs)]
                    out[n, oc, y, xx] = np.sum(window * w[oc])
            if b is not None:
                out[n, oc] += b[oc]
    return out


def ref_conv2d_backward_input(
    g: np.ndarray, w: np.ndarray, x: np.ndarray, **attrs: Any
) -> np.ndarray:
    # Scatter each output gradient back over the window it read.
    _, pad, _ = _conv_geometry(attrs)
    groups = attrs["groups"]
    o, cg, kh, kw = w.shape
    dxp = np.zeros(_padded(x, pad).shape)
    for n in range(g.shape[0]):
        for oc in range(o):
            grp = oc // (o // groups)
            chans = range(grp * cg, (grp + 1) * cg)
            for y in range(g.shape[2]):
                for xx in range(g.shape[3]):
                    dxp[n, chans.start : chans.stop][_conv_window(y, xx, (kh, kw), attrs)] += (
                        g[n, oc, y, xx] * w[oc]
                    )
    return dxp[:, :, pad[0] : pad[0] + x.shape[2], pad[1] : pad[1] + x.shape[3]]


def ref_conv2d_backward_weight(x: np.ndarray, g: np.ndarray, **attrs: Any) -> np.ndarray:
    _, pad, _ = _conv_geometry(attrs)
    groups = attrs["groups"]
    kh, kw = _p(attrs["kernel_size"])
    o, cg = g.shape[1], x.shape[1] // groups
    xp = _padded(x, pad)
    dw = np.zeros((o, cg, kh, kw))
    for n in range(g.shape[0]):
        for oc in range(o):
            grp = oc // (o // groups)
            chans = range(grp * cg, (grp + 1) * cg)
            for y in range(g.shape[2]):
                for xx in range(g.shape[3]):
                    window = xp[n, chans.start : chans.stop][_conv_window(y, xx, (kh, kw), attrs)]
                    dw[oc] += g[n, oc, y, xx] * window
    return dw


def ref_conv_transpose2d(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    # Each input pixel paints its weight-scaled kernel into the (padded) output.
    (sh, sw), pad, (dh, dw) = _conv_geometry(attrs)
    op = _p(attrs["output_padding"])
    groups = attrs["groups"]
    n_, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    out_h = (h - 1) * sh - 2 * pad[0] + dh * (kh - 1) + op[0] + 1
    out_w = (wd - 1) * sw - 2 * pad[1] + dw * (kw - 1) + op[1] + 1
    big = np.zeros((n_, og * groups, out_h + 2 * pad[0], out_w + 2 * pad[1]))
    for n in range(n_):
        for ci in range(cin):
            grp = ci // (cin // groups)
            for y in range(h):
                for xx in range(wd):
                    for i in range(kh):
                        for j in range(kw):
                            big[
                                n, grp * og : (grp + 1) * og, y * sh + i * dh, xx * sw + j * dw
                            ] += x[n, ci, y, xx] * w[ci, :, i, j]
    out = big[:, :, pad[0] : pad[0] + out_h, pad[1] : pad[1] + out_w]
    return out if b is None else out + b[None, :, None, None]


def _pool_windows(x: np.ndarray, attrs: Attrs) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """For each output pixel, the input coordinates of its window (padding included)."""
    (kh, kw), (sh, sw), (ph, pw) = (_p(attrs[k]) for k in ("kernel_size", "stride", "padding"))
    oh = (x.shape[2] + 2 * ph - kh) // sh + 1
    ow = (x.shape[3] + 2 * pw - kw) // sw + 1
    return [
        (y, xx, [(y * sh + i - ph, xx * sw + j - pw) for i in range(kh) for j in range(kw)])
        for y in range(oh)
        for xx in range(ow)
    ]


def _inside(x: np.ndarray, r: int, c: int) -> bool:
    return 0 <= r < int(x.shape[2]) and 0 <= c < int(x.shape[3])


def _argmax_of_window(
    x: np.ndarray, n: int, c: int, cells: list[tuple[int, int]]
) -> tuple[int, int]:
    best, where = -math.inf, cells[0]
    for r, cc in cells:  # first maximum in row-major order
        if _inside(x, r, cc) and x[n, c, r, cc] > best:
            best, where = x[n, c, r, cc], (r, cc)
    return where


def _pooled_shape(
    x: np.ndarray, windows: list[tuple[int, int, list[tuple[int, int]]]]
) -> tuple[int, ...]:
    return (*x.shape[:2], windows[-1][0] + 1, windows[-1][1] + 1)


def ref_max_pool2d(x: np.ndarray, **attrs: Any) -> np.ndarray:
    windows = _pool_windows(x, attrs)
    out = np.zeros(_pooled_shape(x, windows))
    for n, c in np.ndindex(*x.shape[:2]):
        for y, xx, cells in windows:
            r, cc = _argmax_of_window(x, n, c, cells)
            out[n, c, y, xx] = x[n, c, r, cc]
    return out


def ref_max_pool2d_backward(g: np.ndarray, x: np.ndarray, **attrs: Any) -> np.ndarray:
    dx = np.zeros(x.shape)
    for n, c in np.ndindex(*x.shape[:2]):
        for y, xx, cells in _pool_windows(x, attrs):
            r, cc = _argmax_of_window(x, n, c, cells)
            dx[n, c, r, cc] += g[n, c, y, xx]
    return dx


def ref_max_pool2d_select(h: np.ndarray, x: np.ndarray, **attrs: Any) -> np.ndarray:
    windows = _pool_windows(x, attrs)
    out = np.zeros(_pooled_shape(x, windows))
    for n, c in np.ndindex(*x.shape[:2]):
        for y, xx, cells in windows:
            r, cc = _argmax_of_window(x, n, c, cells)
            out[n, c, y, xx] = h[n, c, r, cc]
    return out


def _avg_divisor(x: np.ndarray, cells: list[tuple[int, int]], include_pad: bool) -> int:
    return len(cells) if include_pad else sum(_inside(x, r, c) for r, c in cells)


def ref_avg_pool2d(x: np.ndarray, count_include_pad: bool = True, **attrs: Any) -> np.ndarray:
    windows = _pool_windows(x, attrs)
    out = np.zeros(_pooled_shape(x, windows))
    for n, c in np.ndindex(*x.shape[:2]):
        for y, xx, cells in windows:
            total = sum(x[n, c, r, cc] for r, cc in cells if _inside(x, r, cc))
            out[n, c, y, xx] = total / _avg_divisor(x, cells, count_include_pad)
    return out


def ref_avg_pool2d_backward(
    g: np.ndarray, x: np.ndarray, count_include_pad: bool = True, **attrs: Any
) -> np.ndarray:
    dx = np.zeros(x.shape)
    for n, c in np.ndindex(*x.shape[:2]):
        for y, xx, cells in _pool_windows(x, attrs):
            share = g[n, c, y, xx] / _avg_divisor(x, cells, count_include_pad)
            for r, cc in cells:
                if _inside(x, r, cc):
                    dx[n, c, r, cc] += share
    return dx


def _adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    return [(math.floor(i * size / out), math.ceil((i + 1) * size / out)) for i in range(out)]


def ref_adaptive_avg_pool2d(x: np.ndarray, output_size: Any) -> np.ndarray:
    oh, ow = _p(output_size)
    out = np.zeros((*x.shape[:2], oh, ow))
    for i, (r0, r1) in enumerate(_adaptive_bounds(x.shape[2], oh)):
        for j, (c0, c1) in enumerate(_adaptive_bounds(x.shape[3], ow)):
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return out


def ref_adaptive_avg_pool2d_backward(g: np.ndarray, x: np.ndarray, output_size: Any) -> np.ndarray:
    oh, ow = _p(output_size)
    dx = np.zeros(x.shape)
    for i, (r0, r1) in enumerate(_adaptive_bounds(x.shape[2], oh)):
        for j, (c0, c1) in enumerate(_adaptive_bounds(x.shape[3], ow)):
            dx[:, :, r0:r1, c0:c1] += g[:, :, i : i + 1, j : j + 1] / ((r1 - r0) * (c1 - c0))
    return dx


def _rows(x: np.ndarray, k: int) -> np.ndarray:
    return x.reshape(-1, math.prod(x.shape[x.ndim - k :]))


def _normalized_rows(rows: np.ndarray, eps: float) -> np.ndarray:
    out: np.ndarray = (rows - rows.mean(axis=1, keepdims=True)) / np.sqrt(
        rows.var(axis=1, keepdims=True) + eps
    )
    return out


def _jacobian_vjp(row: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    # d x_hat_i / d x_j = rstd (delta_ij - 1/N - x_hat_i x_hat_j / N), built explicitly.
    size = row.size
    rstd = 1.0 / math.sqrt(row.var() + eps)
    x_hat = (row - row.mean()) * rstd
    jac = rstd * (np.eye(size) - 1.0 / size - np.outer(x_hat, x_hat) / size)
    out: np.ndarray = jac.T @ g
    return out


def ref_layer_norm(
    x: np.ndarray,
    w: np.ndarray | None = None,
    b: np.ndarray | None = None,
    *,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    y = _normalized_rows(_rows(x, len(normalized_shape)), eps).reshape(x.shape)
    return y if w is None else y * w + b


def ref_layer_norm_backward(
    g: np.ndarray, x: np.ndarray, w: np.ndarray | None = None, *, normalized_shape: Any, eps: float
) -> np.ndarray:
    k = len(normalized_shape)
    gw = g if w is None else g * w
    rows = [_jacobian_vjp(r, gr, eps) for r, gr in zip(_rows(x, k), _rows(gw, k), strict=True)]
    return np.stack(rows).reshape(x.shape)


def _channels_last(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _from_channels_last(rows: np.ndarray, like: np.ndarray) -> np.ndarray:
    moved = np.moveaxis(like, 1, -1).shape
    return np.moveaxis(rows.reshape(moved), -1, 1)


def ref_batch_norm(
    x: np.ndarray, w: np.ndarray | None = None, b: np.ndarray | None = None, *, eps: float
) -> np.ndarray:
    cols = _channels_last(x)
    y = (cols - cols.mean(axis=0)) / np.sqrt(cols.var(axis=0) + eps)
    if w is not None:
        y = y * w + b
    return _from_channels_last(y, x)


def ref_batch_norm_backward(
    g: np.ndarray, x: np.ndarray, w: np.ndarray | None = None, *, eps: float
) -> np.ndarray:
    cols, gcols = (
        _channels_last(x),
        _channels_last(g if w is None else g * w.reshape((1, -1) + (1,) * (x.ndim - 2))),
    )
    out = np.stack([_jacobian_vjp(cols[:, c], gcols[:, c], eps) for c in range(x.shape[1])], axis=1)
    return _from_channels_last(out, x)


_M32 = 0xFFFFFFFF


def py_pcg(v: int) -> int:
    """The PCG hash on Python ints, masked to 32 bits by hand."""
    state = (v * 747796405 + 2891336453) & _M32
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & _M32
    return (word >> 22) ^ word


def ref_dropout(x: np.ndarray, seed: np.ndarray, *, p: float) -> np.ndarray:
    if p >= 1.0:
        return np.zeros(x.shape)
    bits = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    key = py_pcg((bits & _M32) ^ py_pcg(bits >> 32))
    threshold = math.floor(p * 2**32)
    flat = x.reshape(-1)
    out = [
        v / (1.0 - p) if py_pcg(py_pcg(i) ^ key) >= threshold else 0.0 for i, v in enumerate(flat)
    ]
    return np.array(out).reshape(x.shape)


def _py_sample_keys(seed: np.ndarray) -> tuple[int, int]:
    bits = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    key = py_pcg((bits & _M32) ^ py_pcg(bits >> 32))
    k1 = py_pcg(key ^ 0x52414E44)
    return k1, py_pcg(k1 ^ 0x4E4F524D)


def ref_rand_like(x: np.ndarray, seed: np.ndarray) -> np.ndarray:
    k1, _ = _py_sample_keys(seed)
    out = [(py_pcg(py_pcg(i) ^ k1) >> 8) / 2**24 for i in range(x.size)]
    return np.array(out, dtype=np.float64).reshape(x.shape)


def ref_randn_like(x: np.ndarray, seed: np.ndarray) -> np.ndarray:
    k1, k2 = _py_sample_keys(seed)
    out = []
    for i in range(x.size):
        u1 = ((py_pcg(py_pcg(i) ^ k1) >> 8) + 1) / 2**24
        u2 = (py_pcg(py_pcg(i) ^ k2) >> 8) / 2**24
        out.append(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
    return np.array(out, dtype=np.float64).reshape(x.shape)


NN_REFERENCES: dict[str, Reference] = {
    "conv2d": ref_conv2d,
    "conv2d_backward_input": ref_conv2d_backward_input,
    "conv2d_backward_weight": ref_conv2d_backward_weight,
    "conv_transpose2d": ref_conv_transpose2d,
    "max_pool2d": ref_max_pool2d,
    "max_pool2d_backward": ref_max_pool2d_backward,
    "max_pool2d_select": ref_max_pool2d_select,
    "avg_pool2d": ref_avg_pool2d,
    "avg_pool2d_backward": ref_avg_pool2d_backward,
    "adaptive_avg_pool2d": ref_adaptive_avg_pool2d,
    "adaptive_avg_pool2d_backward": ref_adaptive_avg_pool2d_backward,
    "layer_norm": ref_layer_norm,
    "layer_norm_backward": ref_layer_norm_backward,
    "batch_norm": ref_batch_norm,
    "batch_norm_backward": ref_batch_norm_backward,
    "dropout": ref_dropout,
    "rand_like": ref_rand_like,
    "randn_like": ref_randn_like,
}


# -- every case of every nn op, float64 and float32 ---------------------------------------------
def _cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(0)
    return [(get_op(name), case) for name in NN_REFERENCES for case in get_op(name).cases(rng)]  # type: ignore[misc]  # cases is set for every nn op


CASES = _cases()


def _case_id(item: tuple[OpDef, OpCase]) -> str:
    return f"{item[0].name}[{item[1].label}]"


# The families of the neural-network ops; softmax and log_softmax (norm family) are
# value-tested with the other row ops in test_op_values.py.
NN_FAMILIES = ("conv", "pool", "norm", "random")
ROW_OPS = {"softmax", "log_softmax"}


def test_every_nn_op_has_a_reference_and_cases() -> None:
    # Ops that expand into others (conv1d as conv2d...) are value-tested with the
    # other ops in test_op_values.py, against references there.
    nn_ops = {op.name for op in all_ops() if op.family in NN_FAMILIES and op.primitive} - ROW_OPS
    assert nn_ops == set(NN_REFERENCES)
    assert all(get_op(name).cases is not None for name in nn_ops)


def test_fused_ops_are_marked() -> None:
    fused = {op.name for op in all_ops() if op.family in NN_FAMILIES and op.composite} - ROW_OPS
    assert fused == {"layer_norm", "layer_norm_backward", "batch_norm", "batch_norm_backward"}
    assert get_op("conv2d").tolerance == (1e-4, 1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("op", "case"), CASES, ids=[_case_id(c) for c in CASES])
def test_value_matches_reference(op: OpDef, case: OpCase, dtype: str) -> None:
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in case.inputs]
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    out = g.apply(op.name, xs, dict(case.attrs))
    (got,) = compile([out])({f"x{i}": a for i, a in enumerate(arrays)})
    assert got.shape == out.shape
    assert got.dtype.name == out.dtype == dtype
    ref_inputs = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    expected = NN_REFERENCES[op.name](*ref_inputs, **case.attrs)
    if dtype == "float64":
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11)
    else:
        rtol, atol = op.tolerance
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


# -- shape rules: properties -----------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 2),
    groups=st.integers(1, 3),
    cg=st.integers(1, 2),
    og=st.integers(1, 2),
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
)
def test_conv2d_shape_rule_agrees_with_the_kernel_and_its_transpose(
    n: int,
    groups: int,
    cg: int,
    og: int,
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
) -> None:
    x = np.ones((n, groups * cg, *size), np.float32)
    w = np.ones((groups * og, cg, *kernel), np.float32)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    g = Graph()
    xt, wt = g.input("x", x.shape), g.input("w", w.shape)
    spans = [dilation[i] * (kernel[i] - 1) + 1 for i in range(2)]
    if any(size[i] + 2 * padding[i] < spans[i] for i in range(2)):
        with pytest.raises(ShapeError, match="larger than the padded input"):
            g.apply("conv2d", (xt, wt), attrs)
        return
    y = g.apply("conv2d", (xt, wt), attrs)
    assert get_op("conv2d").kernel(x, w, **y.node.attrs).shape == y.shape
    # The input gradient has the input's shape; a transposed convolution with the
    # remainder as output_padding maps the output back to the input's size.
    dx = g.apply("conv2d_backward_input", (g.input("gy", y.shape), wt, xt), attrs)
    assert dx.shape == x.shape
    rem = tuple((size[i] + 2 * padding[i] - spans[i]) % stride[i] for i in range(2))
    back = g.apply(
        "conv_transpose2d",
        (g.input("y", y.shape), wt),
        {**attrs, "output_padding": rem},
    )
    assert back.shape == x.shape


@settings(max_examples=60, deadline=None)
@given(
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    pad_frac=st.tuples(st.booleans(), st.booleans()),
    op=st.sampled_from(["max_pool2d", "avg_pool2d"]),
)
def test_pool_shape_rule_agrees_with_the_kernel(
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    pad_frac: tuple[bool, bool],
    op: str,
) -> None:
    padding = tuple(kernel[i] // 2 if pad_frac[i] else 0 for i in range(2))
    attrs = {"kernel_size": kernel, "stride": stride, "padding": padding}
    x = np.random.default_rng(0).standard_normal((1, 2, *size))
    g = Graph()
    xt = g.input("x", x.shape, "float64")
    if any(size[i] + 2 * padding[i] < kernel[i] for i in range(2)):
        with pytest.raises(ShapeError):
            g.apply(op, (xt,), attrs)
        return
    y = g.apply(op, (xt,), attrs)
    got = get_op(op).kernel(x, **y.node.attrs)
    assert got.shape == y.shape
    np.testing.assert_allclose(got, NN_REFERENCES[op](x, **attrs), rtol=1e-12)


# -- errors -------------------------------------------------------------------------------------
def _nchw(
    shape: tuple[int, ...] = (2, 4, 8, 8), name: str = "x", dtype: str = "float32"
) -> tuple[Graph, Any]:
    g = Graph()
    return g, g.input(name, shape, dtype)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kwargs", "message"),
    [
        ((2, 4, 8, 8), (6, 3, 3, 3), {}, "needs 4 input channels per group"),
        ((2, 4, 8, 8), (6, 2, 3, 3), {"groups": 3}, "groups=3 must divide"),
        ((2, 4, 8, 8), (6, 4, 3, 3), {"groups": 2}, "needs 2 input channels per group"),
        ((2, 4, 2, 2), (6, 4, 3, 3), {}, "larger than the padded input (2x2)"),
        ((2, 4, 8, 8), (6, 4, 3, 3), {"dilation": 5}, "window (11x11 with dilation)"),
        ((4, 8, 8), (6, 4, 3, 3), {}, "add a batch axis"),
        ((2, 4, 8, 8), (6, 4, 3), {}, "weight must have rank 4"),
        ((2, 4, 8, 8), (6, 4, 3, 3), {"stride": 0}, "stride must be at least 1"),
        ((2, 4, 8, 8), (6, 4, 3, 3), {"padding": (1, 2, 3)}, "padding must be an int or a pair"),
    ],
)
def test_conv2d_errors(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], kwargs: Attrs, message: str
) -> None:
    g, x = _nchw(x_shape)
    w = g.input("w", w_shape)
    with pytest.raises(ShapeError, match="conv2d") as info:
        conv2d(x, w, **kwargs)
    assert message in str(info.value)


def test_conv2d_error_names_the_user_line() -> None:
    g, x = _nchw((2, 3, 8, 8))
    w = g.input("w", (4, 2, 3, 3))
    with pytest.raises(ShapeError, match=r"test_nn_ops\.py:\d+"):
        conv2d(x, w)


def test_conv2d_bias_and_dtype_errors() -> None:
    g, x = _nchw((2, 4, 8, 8))
    w = g.input("w", (6, 4, 3, 3))
    with pytest.raises(ShapeError, match=r"bias is float32\[5\], expected shape \[6\]"):
        conv2d(x, w, g.input("b", (5,)))
    with pytest.raises(DTypeError, match="input and weight have different dtypes"):
        conv2d(x, g.input("w64", (6, 4, 3, 3), "float64"))
    with pytest.raises(DTypeError, match="must be a float"):
        conv2d(g.input("xi", (2, 4, 8, 8), "int64"), w)
    with pytest.raises(ShapeError, match="padding='same' needs stride 1"):
        conv2d(x, w, padding="same", stride=2)
    with pytest.raises(ShapeError, match="asymmetric padding"):
        conv2d(x, g.input("w2", (6, 4, 2, 2)), padding="same")


def test_conv_transpose2d_errors() -> None:
    g, x = _nchw((2, 4, 5, 5))
    with pytest.raises(ShapeError, match=r"weight .* expects 3"):
        conv_transpose2d(x, g.input("w", (3, 2, 3, 3)))
    w = g.input("w2", (4, 2, 3, 3))
    with pytest.raises(ShapeError, match="output_padding \\[2, 2\\] must be smaller than stride"):
        conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ShapeError, match="groups=3 must divide the input channels"):
        conv_transpose2d(x, w, groups=3)
    with pytest.raises(ShapeError, match="leaves no output"):
        conv_transpose2d(g.input("x1", (1, 4, 1, 1)), w, padding=2)


def test_pool_errors() -> None:
    g, x = _nchw((2, 4, 6, 6))
    with pytest.raises(ShapeError, match="at most half the kernel size"):
        max_pool2d(x, 2, padding=2)
    with pytest.raises(ShapeError, match=r"pooling window .* larger than the padded input"):
        avg_pool2d(x, 7)
    with pytest.raises(ShapeError, match="kernel_size must be at least 1"):
        max_pool2d(x, 0)
    with pytest.raises(ShapeError, match="rank 4"):
        max_pool2d(g.input("v", (4, 6)), 2)
    with pytest.raises(ShapeError, match="output_size must be"):
        adaptive_avg_pool2d(x, (1, 2, 3))


def test_norm_and_dropout_errors() -> None:
    g = Graph()
    x = g.input("x", (3, 5))
    with pytest.raises(ShapeError, match=r"does not end in normalized_shape \[4\]"):
        layer_norm(x, normalized_shape=(4,))
    with pytest.raises(ShapeError, match=r"weight is float32\[4\], expected shape \[5\]"):
        layer_norm(x, g.input("w", (4,)), g.input("b", (5,)), normalized_shape=(5,))
    with pytest.raises(ShapeError, match=r"running_mean has shape \(4,\), expected \(5,\)"):
        batch_norm(x, g.input("rm", (4,)), g.input("rv", (5,)))
    with pytest.raises(ShapeError, match="more than one value per channel"):
        batch_norm(g.input("one", (1, 5)), None, None, training=True)
    with pytest.raises(GraphError, match="needs running_mean and running_var"):
        batch_norm(x, None, None, training=False)
    with pytest.raises(DTypeError, match="seed must be an int32/int64 scalar"):
        dropout(x, 0.5, g.input("s", (), "float32"))
    with pytest.raises(ShapeError, match=r"p must be in \[0, 1\]"):
        dropout(x, 1.5, 0)
    with pytest.raises(GraphError, match="needs a seed"):
        dropout(x, 0.5)
    with pytest.raises(DTypeError, match="indices must be int32 or int64"):
        embedding(x, g.input("table", (10, 4)))


# -- wrappers ---------------------------------------------------------------------------------
def _run(outputs: list[Any], feeds: dict[str, np.ndarray], updates: Any = None) -> list[np.ndarray]:
    return compile(outputs, updates)(feeds)


def test_conv2d_wrapper_padding_modes_and_bias() -> None:
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((2, 3, 7, 6))
    wv, bv = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    g = Graph()
    x, w, b = (
        g.input("x", xv.shape, "float64"),
        g.input("w", wv.shape, "float64"),
        g.input("b", (4,), "float64"),
    )
    same, valid = conv2d(x, w, b, padding="same"), conv2d(x, w, padding="valid")
    assert same.shape == (2, 4, 7, 6)
    assert valid.shape == (2, 4, 5, 4)
    got = _run([same, valid], {"x": xv, "w": wv, "b": bv})
    attrs: Attrs = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}
    np.testing.assert_allclose(got[0], ref_conv2d(xv, wv, bv, **attrs), rtol=1e-10)
    np.testing.assert_allclose(got[1], ref_conv2d(xv, wv, **{**attrs, "padding": 0}), rtol=1e-10)


def test_conv_transpose2d_inverts_the_shape_of_a_strided_conv2d() -> None:
    g, x = _nchw((1, 2, 9, 8))
    w = g.input("w", (3, 2, 3, 3))
    y = conv2d(x, w, stride=2, padding=1)
    assert y.shape == (1, 3, 5, 4)
    assert conv_transpose2d(y, w, stride=2, padding=1, output_padding=(0, 1)).shape == x.shape


def test_pool_wrappers() -> None:
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, 3, 6, 5))
    g = Graph()
    x = g.input("x", xv.shape, "float64")
    mp, ap = max_pool2d(x, 2), avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    gap, keep_w = adaptive_avg_pool2d(x, 1), adaptive_avg_pool2d(x, (2, None))
    assert (mp.shape, ap.shape, gap.shape, keep_w.shape) == (
        (2, 3, 3, 2),
        (2, 3, 6, 5),
        (2, 3, 1, 1),
        (2, 3, 2, 5),
    )
    got = _run([mp, ap, gap], {"x": xv})
    np.testing.assert_allclose(got[0], ref_max_pool2d(xv, kernel_size=2, stride=2, padding=0))
    np.testing.assert_allclose(
        got[1], ref_avg_pool2d(xv, False, kernel_size=3, stride=1, padding=1), rtol=1e-12
    )
    np.testing.assert_allclose(got[2], xv.mean(axis=(2, 3), keepdims=True), rtol=1e-12)


def test_max_pool_gradient_goes_to_the_first_maximum() -> None:
    g = Graph()
    x = g.input("x", (1, 1, 2, 2), "float64")
    gy = g.input("gy", (1, 1, 1, 1), "float64")
    dx = g.apply(
        "max_pool2d_backward", (gy, x), {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
    )
    (got,) = _run([dx], {"x": np.array([[[[1.0, 3.0], [3.0, 0.0]]]]), "gy": np.ones((1, 1, 1, 1))})
    np.testing.assert_array_equal(got, [[[[0.0, 1.0], [0.0, 0.0]]]])


def test_layer_norm_wrapper_weight_only_and_two_axes() -> None:
    rng = np.random.default_rng(2)
    xv, wv = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))
    g = Graph()
    x, w = g.input("x", xv.shape, "float64"), g.input("w", wv.shape, "float64")
    y1, y2 = layer_norm(x), layer_norm(x, w, eps=1e-3)
    got = _run([y1, y2], {"x": xv, "w": wv})
    np.testing.assert_allclose(
        got[0], ref_layer_norm(xv, normalized_shape=(4,), eps=1e-5), rtol=1e-10
    )
    expected = ref_layer_norm(xv, wv, np.zeros((3, 4)), normalized_shape=(3, 4), eps=1e-3)
    np.testing.assert_allclose(got[1], expected, rtol=1e-10)


def test_batch_norm_training_updates_running_statistics() -> None:
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((4, 3, 2, 2)) * 2.0 + 1.0
    g = Graph()
    x = g.input("x", xv.shape, "float64")
    rm = g.parameter("rm", variable=Variable("rm", np.zeros(3), trainable=False))
    rv = g.parameter("rv", variable=Variable("rv", np.ones(3), trainable=False))
    w, b = g.input("w", (3,), "float64"), g.input("b", (3,), "float64")
    out = batch_norm(x, rm, rv, w, b, training=True, momentum=0.25)
    assert out.running_mean is not None
    assert out.running_var is not None
    wv, bv = rng.standard_normal(3), rng.standard_normal(3)
    updates = {
        rm.node.attrs["variable"]: out.running_mean,
        rv.node.attrs["variable"]: out.running_var,
    }
    (y,) = _run([out.y], {"x": xv, "w": wv, "b": bv}, updates)
    np.testing.assert_allclose(y, ref_batch_norm(xv, wv, bv, eps=1e-5), rtol=1e-10)
    cols = _channels_last(xv)
    np.testing.assert_allclose(
        rm.node.attrs["variable"].value, 0.25 * cols.mean(axis=0), rtol=1e-12
    )
    np.testing.assert_allclose(
        rv.node.attrs["variable"].value, 0.75 + 0.25 * cols.var(axis=0, ddof=1), rtol=1e-12
    )


def test_batch_norm_evaluation_uses_running_statistics() -> None:
    rng = np.random.default_rng(4)
    xv, mean, var = rng.standard_normal((5, 3)), rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    g = Graph()
    x = g.input("x", xv.shape, "float64")
    rm, rv = g.input("rm", (3,), "float64"), g.input("rv", (3,), "float64")
    out = batch_norm(x, rm, rv, training=False, eps=1e-3)
    assert out.running_mean is rm
    (y,) = _run([out.y], {"x": xv, "rm": mean, "rv": var})
    np.testing.assert_allclose(y, (xv - mean) / np.sqrt(var + 1e-3), rtol=1e-12)


def test_embedding_gathers_rows() -> None:
    table = np.arange(12.0).reshape(6, 2)
    g = Graph()
    idx, w = g.input("idx", (2, 3), "int64"), g.input("w", (6, 2), "float64")
    y = embedding(idx, w)
    assert y.shape == (2, 3, 2)
    ids = np.array([[0, 5, 2], [2, 2, 1]])
    (got,) = _run([y], {"idx": ids, "w": table})
    np.testing.assert_array_equal(got, table[ids])


# -- dropout ----------------------------------------------------------------------------------
def test_pcg_hash_matches_the_scalar_definition() -> None:
    values = np.array([0, 1, 2, 12345, 0xFFFFFFFF, 0x80000000], dtype=np.uint32)
    assert pcg_hash(values).tolist() == [py_pcg(int(v)) for v in values]
    # Pinned so that the WGSL twin can be checked against numbers, not only numpy.
    assert [py_pcg(v) for v in (0, 1, 2, 12345)] == [129708002, 2831084092, 2055130248, 4099845390]
    assert dropout_key(0) == py_pcg(0 ^ py_pcg(0))
    assert dropout_key(-1) == py_pcg(0xFFFFFFFF ^ py_pcg(0xFFFFFFFF))


def test_dropout_mask_is_pinned() -> None:
    keep = dropout_keep((16,), 7, 0.5)
    assert "".join("1" if k else "0" for k in keep) == "".join(
        "1" if py_pcg(py_pcg(i) ^ dropout_key(7)) >= 2**31 else "0" for i in range(16)
    )
    assert keep.astype(int).tolist() == [0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1]


def test_dropout_rate_scale_and_fresh_masks() -> None:
    x = np.ones((200, 100), np.float32)
    g = Graph()
    xi, seed = g.input("x", x.shape), g.input("seed", (), "int64")
    y = dropout(xi, 0.3, seed)
    prog = compile([y])
    a, b, a2 = (prog({"x": x, "seed": np.array(s)})[0] for s in (1, 2, 1))
    assert abs((a == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(a[a != 0], 1.0 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(a, a2)
    assert 0.35 < ((a == 0) != (b == 0)).mean() < 0.49  # independent masks differ in ~42%
    assert dropout(xi, 0.3, seed, training=False) is xi
    assert dropout(xi, 0.0, seed) is xi


def test_dropout_seed_held_in_a_variable_advances_every_step() -> None:
    g = Graph()
    x = g.input("x", (64,))
    counter = Variable("dropout_seed", np.array(0, np.int64), trainable=False)
    seed = g.parameter("dropout_seed", variable=counter)
    y = dropout(x, 0.5, seed)
    prog = compile([y], {counter: seed + 1})
    masks = [prog({"x": np.ones(64, np.float32)})[0] != 0 for _ in range(3)]
    assert int(counter.value) == 3
    assert not np.array_equal(masks[0], masks[1])
    assert not np.array_equal(masks[1], masks[2])
    np.testing.assert_array_equal(masks[0], dropout_keep((64,), 0, 0.5))


# -- speed --------------------------------------------------------------------------------------
def _conv_step_seconds(x_shape: tuple[int, ...], w_shape: tuple[int, ...], padding: int) -> float:
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(x_shape).astype(np.float32)
    wv = rng.standard_normal(w_shape).astype(np.float32) * 0.1
    g = Graph()
    x, w = g.input("x", x_shape), g.input("w", w_shape)
    y = conv2d(x, w, padding=padding)
    gy = g.input("gy", y.shape)
    dx = g.apply("conv2d_backward_input", (gy, w, x), y.node.attrs)
    dw = g.apply("conv2d_backward_weight", (x, gy), {**y.node.attrs, "kernel_size": w_shape[2:]})
    prog = compile([y, dx, dw])
    feeds = {"x": xv, "w": wv, "gy": rng.standard_normal(y.shape).astype(np.float32)}
    prog(feeds)
    times = []
    for _ in range(5):  # the best of five: robust to a loaded machine
        start = time.perf_counter()
        prog(feeds)
        times.append(time.perf_counter() - start)
    return min(times)


def test_conv2d_forward_and_backward_are_fast() -> None:
    # No Python loop over pixels: the benchmark shapes take milliseconds (about 1-3 ms
    # on one core), not seconds. BLAS runs on one thread here: a multi-threaded BLAS
    # on an oversubscribed machine can be a hundred times slower, which says nothing
    # about the kernels (threadpoolctl comes with scikit-learn).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert _conv_step_seconds((32, 1, 28, 28), (16, 1, 3, 3), 1) < 0.1
        assert _conv_step_seconds((32, 16, 14, 14), (32, 16, 3, 3), 1) < 0.2
