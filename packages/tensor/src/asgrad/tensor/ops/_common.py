"""Shared pieces of the op definitions: broadcasting, axes, dtype rules, cases."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.dtypes import is_float
from asgrad.tensor.errors import ArgumentTypeError, DTypeError, ShapeError
from asgrad.tensor.registry import Attrs, Shape, TensorType


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy's broadcasting rule, with an error that shows every operand shape."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    shown = " and ".join(str(list(s)) for s in shapes)
                    raise ShapeError(
                        f"shapes {shown} do not broadcast: size {size} against {d}"
                        f" at axis {i - ndim}; reshape or broadcast one operand explicitly"
                    )
                size = d
        out.append(size)
    return tuple(out)


def same_dtype(types: Sequence[TensorType], what: str = "operands") -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        shown = ", ".join(str(t) for t in types)
        raise DTypeError(
            f"{what} have different dtypes ({shown}); cast one with .cast(dtype) first"
        )
    return types[0].dtype


def require_float(t: TensorType, what: str = "input") -> None:
    if not is_float(t.dtype):
        raise DTypeError(f"{what} must be float32 or float64, got {t}; cast it first")


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise ArgumentTypeError(f"{what} must be an integer, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{what} {axis} is out of bounds for a value of rank {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative, unique axes; None means every axis."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int | np.integer):
        axes: tuple[Any, ...] = (axis,)
    elif isinstance(axis, Sequence):
        axes = tuple(axis)
    else:
        raise ArgumentTypeError(f"axis must be an integer or a sequence of them, got {axis!r}")
    out = tuple(sorted({int(normalize_axis(a, ndim)) for a in axes}))
    if len(out) != len(axes):
        raise ShapeError(f"axis {axis} repeats an axis")
    return out


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def attr(attrs: Attrs, name: str, default: Any = None) -> Any:
    return attrs.get(name, default)


# -- test-case helpers ---------------------------------------------------------------
def randn(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return rng.standard_normal(shape) * scale


def uniform(rng: np.random.Generator, low: float, high: float, *shape: int) -> np.ndarray:
    return rng.uniform(low, high, shape)


def away_from(rng: np.random.Generator, points: Sequence[float], *shape: int) -> np.ndarray:
    """Standard normal values kept at least 0.05 away from ``points`` (kinks)."""
    x = rng.standard_normal(shape)
    for p in points:
        near = np.abs(x - p) < 0.05
        x = np.where(near, x + np.where(x >= p, 0.1, -0.1), x)
    return x
