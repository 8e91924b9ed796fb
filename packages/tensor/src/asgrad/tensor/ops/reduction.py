"""Reductions over any axes (sum, mean, max, min, var, argmax) and ``size_ratio``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ops._common import (
    normalize_axes,
    normalize_axis,
    randn,
    reduced_shape,
    require_float,
    require_nonempty_axis,
)
from asgrad.tensor.registry import Attrs, OpCase, OpDef, TensorType, register_op


def _infer_reduce(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    if t.dtype == "bool":
        raise DTypeError(f"cannot reduce bool values ({t}); cast them to a number first")
    axes = normalize_axes(attrs["axis"], len(t.shape))
    return TensorType(reduced_shape(t.shape, axes, bool(attrs.get("keepdims", False))), t.dtype)


def _infer_sum(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    # Integers sum in int64 (as numpy and PyTorch), so an int32 total never wraps.
    out = _infer_reduce(types, attrs)
    return TensorType(out.shape, "int64") if out.dtype == "int32" else out


def _infer_reduce_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return _infer_reduce(types, attrs)


def _infer_nonempty_reduce(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    axes = normalize_axes(attrs["axis"], len(types[0].shape))
    if any(types[0].shape[a] == 0 for a in axes):
        raise ShapeError(f"cannot take max/min over an empty axis of {types[0]}")
    return _infer_reduce(types, attrs)


def _infer_argmax(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axis = normalize_axis(attrs["axis"], len(t.shape))
    require_nonempty_axis(t, axis, "take the argmax over")
    keep = bool(attrs.get("keepdims", False))
    return TensorType(reduced_shape(t.shape, (axis,), keep), "int64")


def _infer_size_ratio(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return TensorType((), types[0].dtype)


def _sum(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.sum(x, axis=axis, keepdims=keepdims)
    return out


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.mean(x, axis=axis, keepdims=keepdims)
    return out


def _max(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.max(x, axis=axis, keepdims=keepdims)
    return out


def _min(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.min(x, axis=axis, keepdims=keepdims)
    return out


def _var(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.var(x, axis=axis, keepdims=keepdims)
    return out


def _argmax(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    out: np.ndarray = np.argmax(x, axis=axis, keepdims=keepdims)
    return out


def _size_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a.size / max(b.size, 1), dtype=a.dtype)


def _reduce_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4)
    return [
        OpCase((x3,), {"axis": (0, 1, 2), "keepdims": False}, label="all"),
        OpCase((x3,), {"axis": (1,), "keepdims": True}, label="axis 1 keepdims"),
        OpCase((x3,), {"axis": (0, 2), "keepdims": False}, label="axes 0,2"),
        OpCase((randn(rng, 5, 1),), {"axis": (1,), "keepdims": False}, label="size-1 axis"),
        OpCase((randn(rng, 3, 70),), {"axis": (1,), "keepdims": False}, label="long row"),
    ]


def _argmax_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 5)
    return [
        OpCase((x,), {"axis": 1}, grad=False),
        OpCase((x,), {"axis": 0, "keepdims": True}, grad=False),
    ]


def _size_ratio_cases(rng: np.random.Generator) -> list[OpCase]:
    return [OpCase((randn(rng, 3, 4), randn(rng, 3)), grad=False)]


def _reduction(
    name: str,
    kernel: Callable[..., np.ndarray],
    doc: str,
    infer: Callable[[Sequence[TensorType], Attrs], TensorType] = _infer_reduce,
    tolerance: tuple[float, float] = (1e-5, 1e-5),
) -> None:
    register_op(
        OpDef(
            name=name,
            family="reduction",
            infer=infer,
            kernel=kernel,
            arity=1,
            tolerance=tolerance,
            cases=_reduce_cases,
            doc=doc,
        )
    )


_reduction("sum", _sum, "sum over axes (integers in int64)", _infer_sum)
_reduction("mean", _mean, "mean over axes", _infer_reduce_float)
_reduction("max", _max, "max over axes", _infer_nonempty_reduce)
_reduction("min", _min, "min over axes", _infer_nonempty_reduce)
_reduction("var", _var, "variance over axes (ddof=0)", _infer_reduce_float, (1e-4, 1e-5))
register_op(
    OpDef(
        name="argmax",
        family="reduction",
        infer=_infer_argmax,
        kernel=_argmax,
        arity=1,
        differentiable=False,
        tolerance=(0.0, 0.0),
        cases=_argmax_cases,
        doc="index of the max along an axis",
    )
)
register_op(
    OpDef(
        name="size_ratio",
        family="reduction",
        infer=_infer_size_ratio,
        kernel=_size_ratio,
        arity=2,
        differentiable=False,
        tolerance=(0.0, 0.0),
        cases=_size_ratio_cases,
        doc="a.size / b.size as a scalar (gradient rules of mean and var)",
        shape_only_inputs=(0, 1),
    )
)
