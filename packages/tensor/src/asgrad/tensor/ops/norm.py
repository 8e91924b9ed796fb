"""Normalisation ops: softmax, log-softmax, layer norm and batch norm.

All are composite primitives, each stated once as a row program
(`asgrad.tensor.ir.rows`: reductions along the normalised axes, then one elementwise
output expression): ``OpDef.rows``, from which every backend renders its kernel (the
numpy kernel here is `rows_kernel` of it). The norms have an input-gradient op
(``*_backward``) stated the same way. Their weight and bias gradients are plain
reductions in graph ops, and the gradients of the backward ops come from
differentiating the decomposed definition, so higher-order gradients work.

Softmax, log-softmax and layer norm (and its backward) take their rendered kernel as
their float32 path writing into a given buffer (`IntoKernel`).
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
from asgrad.tensor.ir.rows import Layout, RowBuilder, RowProgram, rows_kernel
from asgrad.tensor.ir.scalar import Expr, exp, log, sqrt

_NORM_TOLERANCE = (1e-4, 1e-5)


# -- softmax ------------------------------------------------------------------------------
def _infer_softmax(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    require_float(t)
    require_nonempty_axis(t, normalize_axis(attrs["axis"], len(t.shape)), "normalise over")
    return t


def _softmax_rows(ndim: int, arity: int, *, axis: int, logs: bool = False) -> RowProgram:
    """``exp(x - max) / sum`` along ``axis`` (logs: ``x - max - log(sum)``)."""
    p = RowBuilder(("element",), axes=(normalize_axis(axis, ndim),))
    x = p.input(0)
    m = p.reduce("max", x)
    s = p.reduce("sum", exp(x - m))
    return p.program(x - m - log(s) if logs else exp(x - m) / s)


def _log_softmax_rows(ndim: int, arity: int, *, axis: int) -> RowProgram:
    return _softmax_rows(ndim, arity, axis=axis, logs=True)


def _softmax_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5),), {"axis": 1}),
        OpCase((randn(rng, 2, 3, 4),), {"axis": 1}),
        OpCase((randn(rng, 2, 3, 4),), {"axis": 0}),
        OpCase((randn(rng, 2, 300, scale=3.0),), {"axis": 1}, label="long rows"),
        OpCase((randn(rng, 3, 6, scale=50.0),), {"axis": 1}, grad=False, label="large"),
    ]


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


def _moments(p: RowBuilder, x: Expr, eps: float) -> tuple[Expr, Expr]:
    """``(x - mean, 1 / std)`` of the row, the population variance from the centred
    values (two passes: safer than ``E[x^2] - E[x]^2``)."""
    centred = x - p.reduce("mean", x)
    var = p.reduce("mean", centred * centred)
    return centred, 1.0 / sqrt(var + eps)


def _normalize_rows(axes: tuple[int, ...], arity: int, eps: float, affine: Layout) -> RowProgram:
    """``(x - mean) / std * weight + bias`` over ``axes``, weight and bias laid out
    per ``affine`` (when given)."""
    p = RowBuilder(("element", affine, affine)[:arity], axes=axes)
    centred, rstd = _moments(p, p.input(0), eps)
    y = centred * rstd
    return p.program(y * p.input(1) + p.input(2) if arity == 3 else y)


def _normalize_backward_rows(
    axes: tuple[int, ...], arity: int, eps: float, affine: Layout
) -> RowProgram:
    """The input gradient of `_normalize_rows` from ``(g, x[, weight])``:
    ``rstd * (gw - mean(gw) - x_hat * mean(gw * x_hat))``, ``gw = g * weight``."""
    p = RowBuilder(("element", "element", affine)[:arity], axes=axes)
    g, x = p.input(0), p.input(1)
    centred, rstd = _moments(p, x, eps)
    x_hat = centred * rstd
    gw = g * p.input(2) if arity == 3 else g
    mean_g = p.reduce("mean", gw)
    mean_gx = p.reduce("mean", gw * x_hat)
    return p.program((gw - mean_g - x_hat * mean_gx) * rstd)


def _layer_norm_rows(ndim: int, arity: int, *, normalized_shape: Any, eps: float) -> RowProgram:
    axes = layer_norm_axes(ndim, {"normalized_shape": normalized_shape})
    return _normalize_rows(axes, arity, eps, "position")


def _layer_norm_backward_rows(
    ndim: int, arity: int, *, normalized_shape: Any, eps: float
) -> RowProgram:
    axes = layer_norm_axes(ndim, {"normalized_shape": normalized_shape})
    return _normalize_backward_rows(axes, arity, eps, "position")


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


def _batch_norm_rows(ndim: int, arity: int, *, eps: float) -> RowProgram:
    return _normalize_rows(batch_norm_axes(ndim), arity, eps, "row")


def _batch_norm_backward_rows(ndim: int, arity: int, *, eps: float) -> RowProgram:
    return _normalize_backward_rows(batch_norm_axes(ndim), arity, eps, "row")


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


_SOFTMAX = rows_kernel(_softmax_rows)
_LOG_SOFTMAX = rows_kernel(_log_softmax_rows)
_LAYER_NORM = rows_kernel(_layer_norm_rows)
_LAYER_NORM_BACKWARD = rows_kernel(_layer_norm_backward_rows)


def _norm_op(name: str, **fields: Any) -> None:
    """Register a composite normalisation op; ``fields``: the other OpDef fields."""
    register_op(OpDef(name=name, family="norm", composite=True, **fields))


_norm_op(
    "softmax",
    attrs=(AXIS,),
    infer=_infer_softmax,
    kernel=_SOFTMAX,
    rows=_softmax_rows,
    arity=1,
    tolerance=(2e-5, 1e-6),
    cases=_softmax_cases,
    doc="exp(x) / sum(exp(x)) along an axis, stable",
    fresh_result=True,
    into=IntoKernel(fn=_SOFTMAX, leading=1),
)
_norm_op(
    "log_softmax",
    attrs=(AXIS,),
    infer=_infer_softmax,
    kernel=_LOG_SOFTMAX,
    rows=_log_softmax_rows,
    arity=1,
    tolerance=(2e-5, 2e-5),
    cases=_softmax_cases,
    doc="x - logsumexp(x) along an axis, stable",
    fresh_result=True,
    into=IntoKernel(fn=_LOG_SOFTMAX, leading=1, work=1),
)
_norm_op(
    "layer_norm",
    attrs=(NORMALIZED_SHAPE, EPS),
    infer=_infer_layer_norm,
    kernel=_LAYER_NORM,
    rows=_layer_norm_rows,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_layer_norm_cases,
    doc="normalise the trailing normalized_shape axes, optional affine",
    fresh_result=True,
    into=IntoKernel(fn=_LAYER_NORM, leading=1),
)
_norm_op(
    "layer_norm_backward",
    attrs=(NORMALIZED_SHAPE, EPS),
    infer=_infer_layer_norm_backward,
    kernel=_LAYER_NORM_BACKWARD,
    rows=_layer_norm_backward_rows,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_layer_norm_backward_cases,
    doc="layer_norm's input gradient from (g, x[, weight])",
    fresh_result=True,
    into=IntoKernel(fn=_LAYER_NORM_BACKWARD, leading=2, work=1),
)
_norm_op(
    "batch_norm",
    attrs=(EPS,),
    infer=_infer_batch_norm,
    kernel=rows_kernel(_batch_norm_rows),
    rows=_batch_norm_rows,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_batch_norm_cases,
    doc="normalise each channel (axis 1) by batch statistics, optional affine",
)
_norm_op(
    "batch_norm_backward",
    attrs=(EPS,),
    infer=_infer_batch_norm_backward,
    kernel=rows_kernel(_batch_norm_backward_rows),
    rows=_batch_norm_backward_rows,
    arity=None,
    tolerance=_NORM_TOLERANCE,
    cases=_batch_norm_backward_cases,
    doc="batch_norm's input gradient from (g, x[, weight])",
)
