"""Normalisations and distances that expand into other ops when applied.

``group_norm`` and ``instance_norm`` normalise groups of channels with the
``layer_norm`` primitive (its fused kernels and gradient) over a reshaped view;
``rms_norm``, ``normalize``, ``cosine_similarity`` and ``pairwise_distance`` are short
compositions of reductions and elementwise ops. Each keeps its gradient finite where
PyTorch's is (a zero vector's norm is clamped before it is divided by).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, normalize_axis, randn, require_float
from asgrad.tensor.ir.common import same_dtype as _same_dtype
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, TensorType, register_expanding

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be positive"


def _p_check(value: float) -> str | None:
    return None if value >= 1.0 else "must be at least 1 (or inf)"


def _eps(default: float | None, doc: str) -> Attr:
    return Attr(
        name="eps", kind=float, default=default, check=_positive, optional=default is None, doc=doc
    )


P = Attr(name="p", kind=float, default=2.0, check=_p_check, doc="the norm's exponent (inf: max)")


def _check_affine(types: Sequence[TensorType], shape: tuple[int, ...], what: str) -> None:
    for t, name in zip(types[1:], ("weight", "bias"), strict=False):
        if t.shape != shape:
            raise ShapeError(f"{name} is {t}, expected shape {list(shape)} ({what})")
    _same_dtype(types, "input, weight and bias")


# -- group norm ------------------------------------------------------------------------------
def _infer_group_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    if len(x.shape) < 2:
        raise ShapeError(f"group norm needs an input (N, C, ...), got {x}")
    groups, channels = int(attrs["num_groups"]), x.shape[1]
    if groups <= 0 or channels % groups:
        raise ShapeError(f"num_groups {groups} must divide the {channels} channels of axis 1")
    if len(types) not in (1, 3):
        raise ShapeError("give the input alone, or with both weight and bias")
    _check_affine(types, (channels,), "one per channel")
    return x


def _group_norm(x: np.ndarray, *affine: np.ndarray, num_groups: int, eps: float) -> np.ndarray:
    n, c = x.shape[0], x.shape[1]
    xr = x.reshape(n, num_groups, -1)
    mean = xr.mean(axis=2, keepdims=True)
    var = xr.var(axis=2, keepdims=True)
    y = ((xr - mean) / np.sqrt(var + eps)).reshape(x.shape)
    if affine:
        shape = (c,) + (1,) * (x.ndim - 2)
        y = y * affine[0].reshape(shape) + affine[1].reshape(shape)
    return np.asarray(y, dtype=x.dtype)


def _expand_group_norm(x: Tensor, *affine: Tensor, num_groups: int, eps: float) -> Tensor:
    c = x.shape[1]
    inner = math.prod(x.shape[1:]) // num_groups
    # -1 on the batch axis: a graph built for one batch size runs on another
    grouped = x.reshape(-1, num_groups, inner)
    y = x.graph.apply("layer_norm", (grouped,), {"normalized_shape": (inner,), "eps": eps})
    y = y.reshape(-1, *x.shape[1:])
    if affine:
        shape = (c,) + (1,) * (x.ndim - 2)
        y = y * affine[0].reshape(shape) + affine[1].reshape(shape)
    return y


def _group_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 6, 3, 3),), {"num_groups": 3}, label="3 groups"),
        OpCase(
            (randn(rng, 3, 4, 5), randn(rng, 4), randn(rng, 4)),
            {"num_groups": 2, "eps": 1e-3},
            label="affine, rank 3",
        ),
        OpCase((randn(rng, 2, 4),), {"num_groups": 4}, label="one channel a group"),
        OpCase((randn(rng, 2, 4, 2, 2, 2),), {"num_groups": 1}, label="one group, 3-d"),
    ]


# -- RMS norm --------------------------------------------------------------------------------
def _rms_shape(attrs: Attrs) -> tuple[int, ...]:
    return tuple(int(d) for d in attrs["normalized_shape"])


def _infer_rms_norm(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    shape = _rms_shape(attrs)
    if not shape or len(shape) > len(x.shape) or x.shape[len(x.shape) - len(shape) :] != shape:
        raise ShapeError(f"input {x} does not end in normalized_shape {list(shape)}")
    if len(types) > 2:
        raise ShapeError("rms norm takes the input and at most a weight")
    _check_affine(types, shape, "normalized_shape")
    return x


def _rms_eps(x: np.ndarray | Tensor, eps: float | None) -> float:
    return float(np.finfo(np.dtype(x.dtype)).eps) if eps is None else float(eps)


def _rms_norm(
    x: np.ndarray, *weight: np.ndarray, normalized_shape: Sequence[int], eps: float | None
) -> np.ndarray:
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + _rms_eps(x, eps))
    return np.asarray(y * weight[0] if weight else y, dtype=x.dtype)


def _expand_rms_norm(
    x: Tensor, *weight: Tensor, normalized_shape: Sequence[int], eps: float | None
) -> Tensor:
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = x / ((x * x).mean(axis=axes, keepdims=True) + _rms_eps(x, eps)).sqrt()
    return y * weight[0] if weight else y


def _rms_norm_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5),), {"normalized_shape": (5,)}, label="last axis"),
        OpCase(
            (randn(rng, 2, 3, 4), randn(rng, 3, 4)),
            {"normalized_shape": (3, 4), "eps": 1e-5},
            label="two axes, weight",
        ),
    ]


# -- normalize and distances -----------------------------------------------------------------
def _p_norm(x: np.ndarray, p: float, axis: int, keepdims: bool = True) -> np.ndarray:
    if math.isinf(p):
        return np.asarray(np.max(np.abs(x), axis=axis, keepdims=keepdims))
    return np.asarray(np.sum(np.abs(x) ** p, axis=axis, keepdims=keepdims) ** (1.0 / p))


def _tensor_p_norm(x: Tensor, p: float, axis: int, floor: float, keepdims: bool) -> Tensor:
    """``max(||x||_p, floor)`` along ``axis``, with a finite gradient at a zero vector:
    the clamp applies before the root (``floor ** p``), so the root never sees 0."""
    if math.isinf(p):
        return x.abs().max(axis=axis, keepdims=keepdims).maximum(floor)
    if p == 2.0:
        return (x * x).sum(axis=axis, keepdims=keepdims).maximum(floor * floor).sqrt()
    if p == 1.0:
        return x.abs().sum(axis=axis, keepdims=keepdims).maximum(floor)
    powered = x.abs() ** p
    return powered.sum(axis=axis, keepdims=keepdims).maximum(floor**p) ** (1.0 / p)


def _infer_normalize(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x = types[0]
    require_float(x)
    normalize_axis(attrs["axis"], len(x.shape))
    return x


def _normalize(x: np.ndarray, p: float, axis: int, eps: float) -> np.ndarray:
    return np.asarray(x / np.maximum(_p_norm(x, p, axis), eps), dtype=x.dtype)


def _expand_normalize(x: Tensor, p: float, axis: int, eps: float) -> Tensor:
    return x / _tensor_p_norm(x, p, normalize_axis(axis, x.ndim), eps, keepdims=True)


def _infer_pair(types: Sequence[TensorType], attrs: Attrs, keep: bool) -> TensorType:
    a, b = types
    require_float(a)
    dtype = _same_dtype(types, "the two inputs")
    shape = broadcast_shapes(a.shape, b.shape)
    if not shape:
        raise ShapeError("the inputs need at least one axis to reduce")
    axis = normalize_axis(attrs["axis"], len(shape))
    out = list(shape)
    if keep:
        out[axis] = 1
    else:
        del out[axis]
    return TensorType(tuple(out), dtype)


def _infer_cosine(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _infer_pair(types, attrs, keep=False)


def _infer_pairwise(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _infer_pair(types, {**attrs, "axis": -1}, keep=attrs["keepdim"])


def _cosine_similarity(a: np.ndarray, b: np.ndarray, axis: int, eps: float) -> Any:
    a, b = np.broadcast_arrays(a, b)  # PyTorch broadcasts first, then reduces
    na = np.maximum(np.sqrt(np.sum(a * a, axis=axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt(np.sum(b * b, axis=axis, keepdims=True)), eps)
    return np.asarray(np.sum((a / na) * (b / nb), axis=axis), dtype=a.dtype)


def _expand_cosine(a: Tensor, b: Tensor, axis: int, eps: float) -> Tensor:
    shape = broadcast_shapes(a.shape, b.shape)
    axis = normalize_axis(axis, len(shape))
    # PyTorch broadcasts first: to the other operand's shape as the graph runs, when it
    # has the whole shape (so its free axes stay free).
    if a.shape != shape:
        a = a.graph.apply("broadcast_like", (a, b)) if b.shape == shape else a.broadcast_to(shape)
    if b.shape != shape:
        b = b.graph.apply("broadcast_like", (b, a))
    na = _tensor_p_norm(a, 2.0, axis, eps, keepdims=True)
    nb = _tensor_p_norm(b, 2.0, axis, eps, keepdims=True)
    return ((a / na) * (b / nb)).sum(axis=axis)


def _pairwise_distance(
    a: np.ndarray, b: np.ndarray, p: float, eps: float, keepdim: bool
) -> np.ndarray:
    return np.asarray(_p_norm(a - b + eps, p, -1, keepdims=keepdim), dtype=a.dtype)


def _expand_pairwise(a: Tensor, b: Tensor, p: float, eps: float, keepdim: bool) -> Tensor:
    return _tensor_p_norm(a - b + eps, p, -1, 0.0, keepdims=keepdim)


def _normalize_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 4),), {"p": 2.0, "axis": 1}, label="rows"),
        OpCase((randn(rng, 2, 3, 2),), {"p": 2.0, "axis": 1}, label="axis 1 of 3"),
        OpCase((randn(rng, 3, 4),), {"p": 1.0, "axis": 0}, label="p=1 columns"),
        OpCase((randn(rng, 3, 4),), {"p": 3.0, "axis": -1}, label="p=3"),
        OpCase(
            (np.vstack([np.zeros(4), randn(rng, 4)]),),
            {"p": 2.0, "axis": 1},
            grad=False,  # x / eps near 0: steeper than a finite difference resolves
            label="a zero row",
        ),
    ]


def _cosine_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 3, 5), randn(rng, 3, 5)), {"axis": 1}, label="rows"),
        OpCase((randn(rng, 4, 3, 2), randn(rng, 3, 2)), {"axis": 1}, label="broadcast"),
        OpCase((randn(rng, 2, 6), randn(rng, 2, 6)), {"axis": 0, "eps": 1e-6}, label="axis 0"),
        OpCase(
            (np.vstack([np.zeros(3), randn(rng, 3)]), randn(rng, 2, 3)),
            {"axis": 1},
            grad=False,  # x / eps near 0: steeper than a finite difference resolves
            label="a zero row",
        ),
    ]


def _pairwise_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 4, 5), randn(rng, 4, 5)), {}, label="p=2"),
        OpCase((randn(rng, 4, 5), randn(rng, 4, 5)), {"p": 1.0, "keepdim": True}, label="p=1"),
        OpCase((randn(rng, 3, 2, 4), randn(rng, 4)), {"p": 3.0}, label="p=3 broadcast"),
    ]


_register = functools.partial(
    register_expanding, family="norm", arity=None, tolerance=(2e-05, 2e-06)
)


_register(
    "group_norm",
    _infer_group_norm,
    _group_norm,
    _expand_group_norm,
    _group_norm_cases,
    "normalise groups of channels (axis 1) by their mean and variance, then scale and shift",
    attrs=(
        Attr(name="num_groups", kind=int, doc="the groups the channels split into"),
        _eps(1e-5, "added to the variance"),
    ),
)
_register(
    "rms_norm",
    _infer_rms_norm,
    _rms_norm,
    _expand_rms_norm,
    _rms_norm_cases,
    "x / sqrt(mean(x**2) + eps) over the trailing axes, times weight",
    attrs=(
        Attr(name="normalized_shape", kind=tuple, doc="the trailing axes' sizes"),
        _eps(None, "added to the mean square (None: the dtype's epsilon)"),
    ),
)
_register(
    "normalize",
    _infer_normalize,
    _normalize,
    _expand_normalize,
    _normalize_cases,
    "x / max(||x||_p, eps) along axis",
    attrs=(
        P,
        Attr(name="axis", kind=int, default=1, doc="the axis normalised"),
        _eps(1e-12, "the smallest norm divided by"),
    ),
)
_register(
    "cosine_similarity",
    _infer_cosine,
    _cosine_similarity,
    _expand_cosine,
    _cosine_cases,
    "sum of x1 / max(||x1||, eps) * x2 / max(||x2||, eps) along axis",
    attrs=(
        Attr(name="axis", kind=int, default=1, doc="the axis reduced"),
        _eps(1e-8, "the smallest norm divided by"),
    ),
)
_register(
    "pairwise_distance",
    _infer_pairwise,
    _pairwise_distance,
    _expand_pairwise,
    _pairwise_cases,
    "||x1 - x2 + eps||_p along the last axis",
    attrs=(
        P,
        _eps(1e-6, "added to the difference"),
        Attr(name="keepdim", kind=bool, default=False, doc="keep the reduced axis, size 1"),
    ),
)
