"""2-D pooling (NCHW): max, average, adaptive average, and their backward ops.

Each kernel loops over the kh*kw kernel offsets (strided slices of the whole
batch), never over pixels. The backward ops are registered ops whose gradient
rules close the set, so higher-order gradients work:

    max_pool2d(x)                    -> y
    max_pool2d_backward(g, x)          g scattered to each window's argmax of x
    max_pool2d_select(h, x)            h gathered at each window's argmax of x
    avg_pool2d(x) / avg_pool2d_backward(g, x)         (each the other's adjoint)
    adaptive_avg_pool2d(x) / adaptive_avg_pool2d_backward(g, x)

The argmax of a window is its first maximum in row-major order, as in PyTorch.
Max pooling's backward ops find it as one bool mask per kernel offset (no index
array, no per-offset ``np.where``); where the windows tile the input exactly
(stride == kernel, no padding, no remainder) the gradient is written once per
offset into a strided view of the result, without a zeroed buffer or accumulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn, same_dtype
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops.spatial import (
    COUNT_INCLUDE_PAD,
    OUTPUT_SIZE,
    POOL_ATTRS,
    Pair,
    crop_hw,
    offset_slice,
    out_hw,
    pad_hw,
    pair,
    require_nchw,
    window_attrs,
)

_NO_DILATION = (1, 1)


# -- shape rules ---------------------------------------------------------------------
def _pool_out(x: TensorType, attrs: Attrs) -> TensorType:
    require_nchw(x, "input")
    kernel, stride, padding = window_attrs(attrs)
    ohw = out_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION, "pooling")
    return TensorType((*x.shape[:2], *ohw), x.dtype)


def _infer_pool(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _pool_out(types[0], attrs)


def _infer_pool_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    expected = _pool_out(x, attrs)
    if g.shape != expected.shape:
        raise ShapeError(f"gradient {g} does not match the pooled output {expected} of {x}")
    same_dtype([g, x], "gradient and input")
    return x


def _infer_max_pool2d_select(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    h, x = types
    if h.shape != x.shape:
        raise ShapeError(f"values {h} must have the shape of the input {x}")
    same_dtype([h, x], "values and input")
    return _pool_out(x, attrs)


def adaptive_output_size(attrs: Attrs) -> Pair:
    return pair(attrs["output_size"], "output_size", minimum=1)


def _infer_adaptive(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (x,) = types
    require_nchw(x, "input")
    oh, ow = adaptive_output_size(attrs)
    return TensorType((*x.shape[:2], oh, ow), x.dtype)


def _infer_adaptive_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    expected = _infer_adaptive([x], attrs)
    if g.shape != expected.shape:
        raise ShapeError(f"gradient {g} does not match the pooled output {expected} of {x}")
    same_dtype([g, x], "gradient and input")
    return x


# -- max pooling ---------------------------------------------------------------------
def _geometry(x: np.ndarray, attrs: dict[str, Any]) -> tuple[Pair, Pair, Pair, Pair]:
    kernel, stride, padding = window_attrs(attrs)
    ohw = out_hw(x.shape[2:], kernel, stride, padding, _NO_DILATION, "pooling")
    return kernel, stride, padding, ohw


def _offsets(kernel: Pair) -> list[tuple[int, int]]:
    return [(i, j) for i in range(kernel[0]) for j in range(kernel[1])]


def _max_pool2d(x: np.ndarray, out: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    kernel, stride, padding, ohw = _geometry(x, attrs)
    xp = pad_hw(x, padding, -np.inf)
    if out is None:
        out = np.empty((*x.shape[:2], *ohw), dtype=x.dtype)
    for k, (i, j) in enumerate(_offsets(kernel)):
        part = xp[offset_slice(i, j, stride, _NO_DILATION, ohw)]
        if k == 0:
            np.copyto(out, part)
        else:
            np.maximum(out, part, out=out)
    return out


def _winners(
    x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, ohw: Pair
) -> list[np.ndarray]:
    """Per kernel offset, a bool mask (output shape) of the windows whose first
    maximum lies at that offset: the masks partition the windows.

    One pass over the offsets keeps the running maximum (``fmax``: a NaN never wins,
    as with ``>``), and each offset's "strictly greater" mask; the winner of a window
    is the last offset that was strictly greater, else offset 0.
    """
    xp = pad_hw(x, padding, -np.inf)
    offsets = _offsets(kernel)
    best = xp[offset_slice(0, 0, stride, _NO_DILATION, ohw)].copy()
    # A NaN at offset 0 stays the running maximum (nothing is greater than it).
    nan_first = bool(np.isnan(best).any())
    masks: list[np.ndarray] = [best]  # offset 0's mask is filled in below
    for i, j in offsets[1:]:
        part = xp[offset_slice(i, j, stride, _NO_DILATION, ohw)]
        better = np.greater(part, best)
        if nan_first:
            np.copyto(best, part, where=better)
        else:
            np.fmax(best, part, out=best)
        masks.append(better)
    if len(offsets) == 1:
        return [np.ones(best.shape, dtype=bool)]
    taken = masks[-1].copy()  # windows won by a later offset
    for k in range(len(offsets) - 2, 0, -1):
        np.greater(masks[k], taken, out=masks[k])  # better_k and not taken
        taken |= masks[k]
    masks[0] = np.logical_not(taken)
    return masks


_INT_OF = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _masked_into(dst: np.ndarray, mask: np.ndarray, g: np.ndarray) -> None:
    """``dst[...] = where(mask, g, +0.0)``, bit for bit (an AND with the mask)."""
    itype = _INT_OF.get(g.dtype)
    if itype is None:
        np.copyto(dst, np.where(mask, g, np.zeros((), dtype=g.dtype)))
        return
    bits = mask.view(np.uint8).astype(itype)
    np.negative(bits, out=bits)  # True -> all ones, False -> 0
    np.bitwise_and(bits, g.view(itype), out=dst.view(itype))


def _tiles(x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, ohw: Pair) -> bool:
    """Whether the windows tile x exactly: stride == kernel, no padding, no remainder."""
    return (
        stride == kernel
        and padding == (0, 0)
        and x.shape[2] == ohw[0] * kernel[0]
        and x.shape[3] == ohw[1] * kernel[1]
    )


def _max_pool2d_backward(
    g: np.ndarray, x: np.ndarray, out: np.ndarray | None = None, **attrs: Any
) -> np.ndarray:
    kernel, stride, padding, ohw = _geometry(x, attrs)
    masks = _winners(x, kernel, stride, padding, ohw)
    n, c, h, w = x.shape
    if _tiles(x, kernel, stride, padding, ohw):  # each input pixel in one window
        if out is None:
            out = np.empty(x.shape, dtype=g.dtype)
        tiled = out.reshape(n, c, ohw[0], kernel[0], ohw[1], kernel[1])
        for mask, (i, j) in zip(masks, _offsets(kernel), strict=True):
            _masked_into(tiled[:, :, :, i, :, j], mask, g)
        return out
    dxp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), dtype=g.dtype)
    share = np.empty(g.shape, dtype=g.dtype)
    for mask, (i, j) in zip(masks, _offsets(kernel), strict=True):
        _masked_into(share, mask, g)
        dxp[offset_slice(i, j, stride, _NO_DILATION, ohw)] += share
    if out is None:
        return crop_hw(dxp, padding, (h, w))
    np.copyto(out, dxp[:, :, padding[0] : padding[0] + h, padding[1] : padding[1] + w])
    return out


def _max_pool2d_select(h: np.ndarray, x: np.ndarray, **attrs: Any) -> np.ndarray:
    kernel, stride, padding, ohw = _geometry(x, attrs)
    masks = _winners(x, kernel, stride, padding, ohw)
    hp = pad_hw(h, padding)
    out = np.empty(masks[0].shape, dtype=h.dtype)  # the masks cover every window once
    for mask, (i, j) in zip(masks, _offsets(kernel), strict=True):
        np.copyto(out, hp[offset_slice(i, j, stride, _NO_DILATION, ohw)], where=mask)
    return out


# -- average pooling -------------------------------------------------------------------
def _divisor(
    x: np.ndarray, kernel: Pair, padding: Pair, ohw: Pair, stride: Pair, count_include_pad: bool
) -> np.ndarray | float:
    """What each window's sum is divided by: kh*kw, or its count of real pixels."""
    if count_include_pad or (not padding[0] and not padding[1]):
        return float(kernel[0] * kernel[1])
    counts = []
    for axis in range(2):
        start = np.arange(ohw[axis]) * stride[axis] - padding[axis]
        stop = np.minimum(start + kernel[axis], x.shape[2 + axis])
        counts.append(stop - np.maximum(start, 0))
    return np.outer(counts[0], counts[1]).astype(x.dtype)


def _avg_pool2d(x: np.ndarray, count_include_pad: bool, **attrs: Any) -> np.ndarray:
    kernel, stride, padding, ohw = _geometry(x, attrs)
    xp = pad_hw(x, padding)
    out = np.zeros((*x.shape[:2], *ohw), dtype=x.dtype)
    for i, j in _offsets(kernel):
        out += xp[offset_slice(i, j, stride, _NO_DILATION, ohw)]
    div = _divisor(x, kernel, padding, ohw, stride, count_include_pad)
    out /= np.asarray(div, dtype=x.dtype)
    return out


def _avg_pool2d_backward(
    g: np.ndarray, x: np.ndarray, count_include_pad: bool, **attrs: Any
) -> np.ndarray:
    kernel, stride, padding, ohw = _geometry(x, attrs)
    div = _divisor(x, kernel, padding, ohw, stride, count_include_pad)
    share = g / np.asarray(div, dtype=g.dtype)
    n, c, h, w = x.shape
    dxp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), dtype=g.dtype)
    for i, j in _offsets(kernel):
        dxp[offset_slice(i, j, stride, _NO_DILATION, ohw)] += share
    return crop_hw(dxp, padding, (h, w))


# -- adaptive average pooling -----------------------------------------------------------
def adaptive_matrix(size: int, out: int, dtype: Any) -> np.ndarray:
    """(out, size): row i averages [floor(i size / out), ceil((i + 1) size / out))."""
    i = np.arange(out)
    start = (i * size) // out
    stop = -((-(i + 1) * size) // out)
    cols = np.arange(size)
    inside = (cols >= start[:, None]) & (cols < stop[:, None])
    return (inside / (stop - start)[:, None]).astype(dtype)


def _adaptive_avg_pool2d(x: np.ndarray, output_size: Any) -> np.ndarray:
    oh, ow = pair(output_size, "output_size", minimum=1)
    ph = adaptive_matrix(x.shape[2], oh, x.dtype)
    pw = adaptive_matrix(x.shape[3], ow, x.dtype)
    out: np.ndarray = np.matmul(ph, np.matmul(x, pw.T))
    return out


def _adaptive_avg_pool2d_backward(g: np.ndarray, x: np.ndarray, output_size: Any) -> np.ndarray:
    oh, ow = pair(output_size, "output_size", minimum=1)
    ph = adaptive_matrix(x.shape[2], oh, g.dtype)
    pw = adaptive_matrix(x.shape[3], ow, g.dtype)
    out: np.ndarray = np.matmul(ph.T, np.matmul(g, pw))
    return out


# -- cases --------------------------------------------------------------------------------
_POOL_CONFIGS: list[tuple[tuple[int, ...], dict[str, Any], str]] = [
    ((2, 3, 4, 4), {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}, "2x2"),
    ((1, 2, 5, 6), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (0, 0)}, "overlap"),
    ((1, 2, 5, 5), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1)}, "padded"),
    ((2, 1, 7, 5), {"kernel_size": (2, 3), "stride": (3, 2), "padding": (1, 0)}, "stride 3"),
]


def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values at least 0.01 apart, so a window's argmax is stable under eps shifts."""
    size = int(np.prod(shape))
    return (rng.permutation(size) * 0.05 - size * 0.025 + 0.01 * rng.random(size)).reshape(shape)


def _max_pool_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = [OpCase((_distinct(rng, *s),), a, label=label) for s, a, label in _POOL_CONFIGS]
    ties = np.zeros((1, 1, 4, 4))
    cases.append(OpCase((ties,), _POOL_CONFIGS[0][1], grad=False, label="ties"))
    return cases


def _max_pool_pair_cases(rng: np.random.Generator, gradient_first: bool) -> list[OpCase]:
    cases = []
    for s, a, label in _POOL_CONFIGS:
        x = _distinct(rng, *s)
        if gradient_first:
            g = randn(rng, *_max_pool2d(x, **a).shape)
            cases.append(OpCase((g, x), a, wrt=(0,), label=label))
        else:
            cases.append(OpCase((randn(rng, *s), x), a, wrt=(0,), label=label))
    return cases


def _avg_pool_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = []
    for s, a, label in _POOL_CONFIGS:
        for include in (True, False):
            attrs = {**a, "count_include_pad": include}
            cases.append(OpCase((randn(rng, *s),), attrs, label=f"{label} include={include}"))
    return cases


def _avg_pool_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = []
    for s, a, label in _POOL_CONFIGS:
        for include in (True, False):
            attrs = {**a, "count_include_pad": include}
            x = randn(rng, *s)
            g = randn(rng, *_avg_pool2d(x, **attrs).shape)
            cases.append(OpCase((g, x), attrs, wrt=(0,), label=f"{label} include={include}"))
    return cases


_ADAPTIVE_CONFIGS = [
    ((2, 3, 6, 6), (3, 3)),
    ((1, 2, 7, 5), (3, 2)),
    ((2, 2, 5, 4), (1, 1)),
    ((1, 1, 3, 3), (5, 4)),
]


def _adaptive_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, *s),), {"output_size": o}, label=f"{list(s[2:])}->{list(o)}")
        for s, o in _ADAPTIVE_CONFIGS
    ]


def _adaptive_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase(
            (randn(rng, *s[:2], *o), randn(rng, *s)),
            {"output_size": o},
            wrt=(0,),
            label=f"{list(s[2:])}->{list(o)}",
        )
        for s, o in _ADAPTIVE_CONFIGS
    ]


def _pool_op(name: str, **fields: Any) -> None:
    """Register a pooling op; ``fields`` are the other [`OpDef`][asgrad.tensor.OpDef] fields, by
    keyword."""
    register_op(OpDef(name=name, family="pool", tolerance=(1e-5, 1e-6), **fields))


_pool_op(
    "max_pool2d",
    attrs=POOL_ATTRS,
    infer=_infer_pool,
    kernel=_max_pool2d,
    arity=1,
    cases=_max_pool_cases,
    doc="max over kh x kw windows (kernel_size, stride, padding)",
    writes_out=True,
)
_pool_op(
    "max_pool2d_backward",
    attrs=POOL_ATTRS,
    infer=_infer_pool_backward,
    kernel=_max_pool2d_backward,
    arity=2,
    cases=lambda rng: _max_pool_pair_cases(rng, True),
    doc="max_pool2d's gradient: g scattered to each window's argmax of x",
    writes_out=True,
)
_pool_op(
    "max_pool2d_select",
    attrs=POOL_ATTRS,
    infer=_infer_max_pool2d_select,
    kernel=_max_pool2d_select,
    arity=2,
    cases=lambda rng: _max_pool_pair_cases(rng, False),
    doc="h gathered at each window's argmax of x (max_pool2d_backward's gradient)",
)
_pool_op(
    "avg_pool2d",
    attrs=(*POOL_ATTRS, COUNT_INCLUDE_PAD),
    infer=_infer_pool,
    kernel=accumulating(_avg_pool2d),
    arity=1,
    cases=_avg_pool_cases,
    doc="mean over kh x kw windows (padding, count_include_pad)",
)
_pool_op(
    "avg_pool2d_backward",
    attrs=(*POOL_ATTRS, COUNT_INCLUDE_PAD),
    infer=_infer_pool_backward,
    kernel=accumulating(_avg_pool2d_backward),
    arity=2,
    cases=_avg_pool_backward_cases,
    doc="avg_pool2d's gradient, spread over each window",
)
_pool_op(
    "adaptive_avg_pool2d",
    attrs=(OUTPUT_SIZE,),
    infer=_infer_adaptive,
    kernel=accumulating(_adaptive_avg_pool2d),
    arity=1,
    cases=_adaptive_cases,
    doc="mean pooling to a fixed output_size (PyTorch's window bounds)",
)
_pool_op(
    "adaptive_avg_pool2d_backward",
    attrs=(OUTPUT_SIZE,),
    infer=_infer_adaptive_backward,
    kernel=accumulating(_adaptive_avg_pool2d_backward),
    arity=2,
    cases=_adaptive_backward_cases,
    doc="adaptive_avg_pool2d's gradient",
)
