"""Normalisation ops: softmax, log-softmax, layer norm and batch norm.

All are composite primitives: one numpy kernel for the forward pass and, for the
norms, one for the input gradient (``*_backward``), each a registered op. Their
weight and bias gradients are plain reductions in graph ops, and the gradients of
the backward ops come from differentiating the decomposed definition, so
higher-order gradients work.

Softmax and layer norm (and its backward) have float32 paths writing into a given
buffer (`IntoKernel`), bit for bit their kernels:
rows of the normalised size, the rest in place; a row's sum of squares is one dot
product (einsum), without a squared temporary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import (
    int_arg,
    normalize_axis,
    randn,
    require_float,
    require_nonempty_axis,
    same_dtype,
)
from asgrad.tensor.ir.registry import (
    Attr,
    Attrs,
    IntoKernel,
    OpCase,
    OpDef,
    Shape,
    TensorType,
    register_op,
)
from asgrad.tensor.ops._moments import normalize, normalize_backward, row_stats

_NORM_TOLERANCE = (1e-4, 1e-5)


# -- softmax ------------------------------------------------------------------------------
def _infer_softmax(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    require_float(t)
    require_nonempty_axis(t, normalize_axis(attrs["axis"], len(t.shape)), "normalise over")
    return t


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    out: np.ndarray = e
    return out


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    out: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return out


def _softmax_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5),), {"axis": 1}),
        OpCase((randn(rng, 2, 3, 4),), {"axis": 1}),
        OpCase((randn(rng, 2, 3, 4),), {"axis": 0}),
        OpCase((randn(rng, 2, 300, scale=3.0),), {"axis": 1}, label="long rows"),
        OpCase((randn(rng, 3, 6, scale=50.0),), {"axis": 1}, grad=False, label="large"),
    ]


def softmax_into(x: np.ndarray, *, out: np.ndarray | None = None, axis: int) -> np.ndarray:
    """The registered ``softmax`` kernel, its result written into ``out`` (x's shape and
    dtype; may be x itself: the row maxima are taken before it is written), bit for bit:
    ``exp(x - max) / sum`` with the same reductions, no fresh temporaries of x's size.
    """
    m = np.maximum.reduce(x, axis=axis, keepdims=True)
    e: np.ndarray = np.subtract(x, m) if out is None else np.subtract(x, m, out=out)
    np.exp(e, out=e)
    e /= np.add.reduce(e, axis=axis, keepdims=True)
    return e


# -- shared normalisation ------------------------------------------------------------
def layer_norm_axes(ndim: int, attrs: Attrs) -> tuple[int, ...]:
    """The trailing axes that ``normalized_shape`` covers."""
    k = len(tuple(attrs["normalized_shape"]))
    return tuple(range(ndim - k, ndim))


def batch_norm_axes(ndim: int) -> tuple[int, ...]:
    """Every axis but the channel axis 1."""
    return (0, *range(2, ndim))


# -- layer norm ------------------------------------------------------------------------
def _check_affine(types: Sequence[TensorType], shape: tuple[int, ...], what: str) -> None:
    if len(types) == 1:
        return
    if len(types) != 3:
        raise ShapeError(
            f"takes (x) or (x, weight, bias), got {len(types)} inputs; pass a zero"
            " bias for a weight-only affine"
        )
    for t, name in ((types[1], "weight"), (types[2], "bias")):
        if t.shape != shape:
            raise ShapeError(f"{name} is {t}, expected shape {list(shape)} ({what})")
    same_dtype(types, "input, weight and bias")


def _normalized_shape(attrs: Attrs) -> Shape:
    return tuple(int_arg(d, "normalized_shape") for d in attrs["normalized_shape"])


def _infer_layer_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    shape = _normalized_shape(attrs)
    if not shape:
        raise ShapeError("normalized_shape must name at least one trailing axis")
    if x.shape[len(x.shape) - len(shape) :] != shape or len(shape) > len(x.shape):
        raise ShapeError(
            f"input {x} does not end in normalized_shape {list(shape)}; layer norm"
            " normalises the trailing axes"
        )
    _check_affine(types, shape, "normalized_shape")
    return x


def _check_backward(types: Sequence[TensorType], weight_shape: Callable[[], Shape]) -> None:
    """The operands ``(g, x[, weight])`` of a norm's backward op."""
    g, x = types[0], types[1]
    if g.shape != x.shape:
        raise ShapeError(f"gradient {g} must have the shape of the input {x}")
    same_dtype([g, x], "gradient and input")
    if len(types) == 3:
        if types[2].shape != weight_shape():
            raise ShapeError(f"weight is {types[2]}, expected shape {list(weight_shape())}")
    elif len(types) != 2:
        raise ShapeError(f"takes (g, x) or (g, x, weight), got {len(types)} inputs")


def _infer_layer_norm_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check_backward(types, lambda: _normalized_shape(attrs))
    return _infer_layer_norm([types[1]], attrs)


def _layer_norm(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    if _f32_rows(x, weight):
        return layer_norm_into(x, weight, bias, normalized_shape=normalized_shape, eps=eps)
    y, _ = normalize(x, layer_norm_axes(x.ndim, {"normalized_shape": normalized_shape}), eps)
    if weight is not None and bias is not None:
        y = y * weight + bias
    return y


def _layer_norm_backward(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    if _f32_rows(x, weight) and g.dtype == np.float32:
        return layer_norm_backward_into(g, x, weight, normalized_shape=normalized_shape, eps=eps)
    axes = layer_norm_axes(x.ndim, {"normalized_shape": normalized_shape})
    return normalize_backward(g if weight is None else g * weight, x, axes, eps)


def _f32_rows(x: np.ndarray, weight: np.ndarray | None) -> bool:
    return x.dtype == np.float32 and x.size > 0 and (weight is None or weight.dtype == np.float32)


def layer_norm_into(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    """The ``layer_norm`` kernel's float32 path (float32 x and weight, nonzero size),
    its result written into ``out`` when given (x's shape; may be x: x is read only
    before it is written; a non-contiguous ``out`` is left alone and the result is
    fresh), bit for bit the same either way."""
    target = out if out is not None and out.flags.c_contiguous else None  # reshapes are views
    y, rstd, _ = row_stats(x, normalized_shape, eps, target)
    y *= rstd
    if weight is not None and bias is not None:
        y *= weight.reshape(-1)
        y += bias.reshape(-1)
    return y.reshape(x.shape)


def layer_norm_backward_into(
    g: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
    work: tuple[np.ndarray, ...] | None = None,
    normalized_shape: Any,
    eps: float,
) -> np.ndarray:
    """The ``layer_norm_backward`` kernel's float32 path (float32 g, x and weight), bit
    for bit: the result in ``out`` (x's shape; may be g or x) or fresh, the centred x
    in ``work[0]`` (x's shape, overlapping none of g, x, out) or fresh."""
    x_hat, rstd, n = row_stats(x, normalized_shape, eps, None if work is None else work[0])
    x_hat *= rstd
    scale = np.float32(1.0) if weight is None else weight.reshape(-1)
    gw: np.ndarray = (
        g.reshape(x_hat.shape) * scale
        if out is None
        else np.multiply(g.reshape(x_hat.shape), scale, out=out.reshape(x_hat.shape))
    )
    mean_g = np.add.reduce(gw, axis=1, keepdims=True)
    mean_g *= np.float32(1.0 / n)
    mean_gx = np.einsum("ij,ij->i", gw, x_hat)[:, None]
    mean_gx *= np.float32(1.0 / n)
    gw -= mean_g
    x_hat *= mean_gx
    gw -= x_hat
    gw *= rstd
    return gw.reshape(x.shape)


# -- batch norm (training: batch statistics) --------------------------------------------
def _infer_batch_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    if len(x.shape) < 2:
        raise ShapeError(f"input must be (N, C, ...), got {x}")
    _check_affine(types, (x.shape[1],), "one value per channel")
    per_channel = math.prod(x.shape) // x.shape[1] if x.shape[1] else 0
    if per_channel < 2:
        raise ShapeError(
            f"batch statistics need more than one value per channel; input {x} has"
            f" {per_channel}. Train on batches of at least 2 (or put the layer in eval mode)"
        )
    return x


def _infer_batch_norm_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    _check_backward(types, lambda: (types[1].shape[1],))
    return _infer_batch_norm([types[1]], attrs)


def _channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _batch_norm(
    x: np.ndarray,
    weight: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    eps: float,
) -> np.ndarray:
    y, _ = normalize(x, batch_norm_axes(x.ndim), eps)
    if weight is not None and bias is not None:
        y = y * _channel(weight, x.ndim) + _channel(bias, x.ndim)
    return y


def _batch_norm_backward(
    g: np.ndarray, x: np.ndarray, weight: np.ndarray | None = None, *, eps: float
) -> np.ndarray:
    gw = g if weight is None else g * _channel(weight, x.ndim)
    return normalize_backward(gw, x, batch_norm_axes(x.ndim), eps)


# -- cases ------------------------------------------------------------------------------------
def _layer_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5),), {"normalized_shape": (5,), "eps": 1e-5}, label="plain"),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 4), randn(rng, 4)),
            {"normalized_shape": (4,), "eps": 1e-5},
            label="affine",
        ),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 3, 4), randn(rng, 3, 4)),
            {"normalized_shape": (3, 4), "eps": 1e-3},
            label="two axes",
        ),
        OpCase(
            (randn(rng, 4, 64, scale=5.0) + 3.0,),
            {"normalized_shape": (64,), "eps": 1e-5},
            label="long rows, offset",
        ),
    ]


def _layer_norm_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5), randn(rng, 3, 5)), {"normalized_shape": (5,), "eps": 1e-5}),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 2, 3, 4), randn(rng, 4)),
            {"normalized_shape": (4,), "eps": 1e-5},
            label="weight",
        ),
        OpCase(
            (randn(rng, 2, 2, 3), randn(rng, 2, 2, 3), randn(rng, 2, 3)),
            {"normalized_shape": (2, 3), "eps": 1e-3},
            label="two axes",
        ),
    ]


def _batch_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 6, 3),), {"eps": 1e-5}, label="(N, C)"),
        OpCase(
            (randn(rng, 3, 2, 4), randn(rng, 2), randn(rng, 2)), {"eps": 1e-5}, label="(N, C, L)"
        ),
        OpCase(
            (randn(rng, 2, 3, 3, 2) * 2.0 + 1.0, randn(rng, 3), randn(rng, 3)),
            {"eps": 1e-3},
            label="(N, C, H, W)",
        ),
    ]


def _batch_norm_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 5, 3), randn(rng, 5, 3)), {"eps": 1e-5}, label="(N, C)"),
        OpCase(
            (randn(rng, 2, 3, 2, 2), randn(rng, 2, 3, 2, 2), randn(rng, 3)),
            {"eps": 1e-5},
            label="(N, C, H, W) weight",
        ),
    ]


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be positive"


# The attributes of the normalisations.
AXIS = Attr(name="axis", kind=int, doc="the axis normalised over")
EPS = Attr(name="eps", kind=float, default=1e-5, check=_positive, doc="added to the variance")
NORMALIZED_SHAPE = Attr(name="normalized_shape", kind=tuple, doc="the trailing axes' sizes")


def _norm_op(name: str, **fields: Any) -> None:
    """Register a composite normalisation op; ``fields``: the other OpDef fields."""
    register_op(OpDef(name=name, family="norm", composite=True, **fields))


_norm_op(
    "softmax",
    attrs=(AXIS,),
    infer=_infer_softmax,
    kernel=_softmax,
    arity=1,
    tolerance=(2e-5, 1e-6),
    cases=_softmax_cases,
    doc="exp(x) / sum(exp(x)) along an axis, stable",
    fresh_result=True,
    into=IntoKernel(fn=softmax_into, leading=1),
)
_norm_op(
    "log_softmax",
    attrs=(AXIS,),
    infer=_infer_softmax,
    kernel=_log_softmax,
    arity=1,
    tolerance=(2e-5, 2e-5),
    cases=_softmax_cases,
    doc="x - logsumexp(x) along an axis, stable",
    fresh_result=True,
)
_norm_op(
    "layer_norm",
    attrs=(NORMALIZED_SHAPE, EPS),
    infer=_infer_layer_norm,
    kernel=_layer_norm,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_layer_norm_cases,
    doc="normalise the trailing normalized_shape axes, optional affine",
    fresh_result=True,
    into=IntoKernel(fn=layer_norm_into, leading=1),
)
_norm_op(
    "layer_norm_backward",
    attrs=(NORMALIZED_SHAPE, EPS),
    infer=_infer_layer_norm_backward,
    kernel=_layer_norm_backward,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_layer_norm_backward_cases,
    doc="layer_norm's input gradient from (g, x[, weight])",
    fresh_result=True,
    into=IntoKernel(fn=layer_norm_backward_into, leading=2, work=1),
)
_norm_op(
    "batch_norm",
    attrs=(EPS,),
    infer=_infer_batch_norm,
    kernel=_batch_norm,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_batch_norm_cases,
    doc="normalise each channel (axis 1) by batch statistics, optional affine",
)
_norm_op(
    "batch_norm_backward",
    attrs=(EPS,),
    infer=_infer_batch_norm_backward,
    kernel=_batch_norm_backward,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_batch_norm_backward_cases,
    doc="batch_norm's input gradient from (g, x[, weight])",
)
