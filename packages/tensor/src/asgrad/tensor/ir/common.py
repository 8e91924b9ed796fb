"""Shared pieces of the op definitions and their front doors: broadcasting, axes, sizes,
argument checks, dtype rules, cases."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ArgumentTypeError, DTypeError, OutOfRangeError, ShapeError
from asgrad.tensor.ir.dtypes import is_float
from asgrad.tensor.ir.registry import Shape, TensorType


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
        raise DTypeError(
            f"{what} must be a float (float16, float32 or float64), got {t}; cast it first"
        )


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``; negative axes count from the end, as in numpy."""
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise ArgumentTypeError(f"{what} must be an integer, got {axis!r}")
    if not ndim:
        raise ShapeError(f"{what} {axis} is out of bounds: a scalar (rank 0) has no axes")
    if not -ndim <= axis < ndim:
        raise ShapeError(
            f"{what} {axis} is out of bounds for a value of rank {ndim};"
            f" use an axis in [{-ndim}, {ndim - 1}]"
        )
    return int(axis) % ndim


def require_nonempty_axis(t: TensorType, axis: int, doing: str) -> None:
    """A ShapeError when an op ``doing`` something over ``axis`` of ``t`` finds it empty."""
    if t.shape[axis] == 0:
        raise ShapeError(
            f"cannot {doing} axis {axis} of {t}: it has size 0, so there is no element"
            " to take; check how the value became empty (an empty batch or class axis)"
        )


# Element counts above this overflow numpy's int64 sizes (and any memory).
MAX_ELEMENTS = 2**63 - 1


def check_size(shape: Shape, what: str, itemsize: int = 1) -> None:
    """A ShapeError when ``shape`` has more elements (times ``itemsize`` bytes) than an
    int64 can count, so that no array of it could exist."""
    count = math.prod(shape)
    if count * itemsize > MAX_ELEMENTS:
        nbytes = f" of {itemsize} bytes" if itemsize > 1 else ""
        raise ShapeError(
            f"{what} has shape {list(shape)}: {count} elements{nbytes}, more than an"
            " int64 can count (2**63 - 1); no array can be this large, check the sizes"
        )


def shape_arg(args: tuple[Any, ...], what: str = "sizes") -> tuple[int, ...]:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, as ints; a float, string or None is an
    error, not truncated."""
    dims = args[0] if len(args) == 1 and not isinstance(args[0], int | np.integer) else args
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise ArgumentTypeError(f"{what} must be integers, got {args!r}") from None


def int_arg(value: Any, what: str) -> int:
    """``value`` as an int; a float or string is an error, not truncated."""
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{what} must be an integer, got {value!r}") from None


def float_arg(value: Any, what: str) -> float:
    """``value`` as a float (a real number, not a string)."""
    if isinstance(value, str) or not isinstance(value, int | float | np.number):
        raise ArgumentTypeError(f"{what} must be a real number, got {value!r}")
    return float(value)


def expand_ellipsis(items: tuple[object, ...], ndim: int) -> tuple[object, ...]:
    """An index with its ``...`` replaced by as many ``:`` as the axes it stands for."""
    count = sum(item is Ellipsis for item in items)
    if count > 1:
        raise OutOfRangeError("an index can only have a single ellipsis ('...')")
    if not count:
        return items
    used = sum(item is not None and item is not Ellipsis for item in items)
    at = items.index(Ellipsis)
    return items[:at] + (slice(None),) * (ndim - used) + items[at + 1 :]


def check_basic_index(items: tuple[object, ...], shape: Shape) -> None:
    """Errors for an index (``...`` expanded, ``None`` dropped) that numpy rejects too:
    more items than axes (``x[:]`` on a scalar), and a slice bound that is a Tensor."""
    for item in items:
        if isinstance(item, slice):
            bounds = (item.start, item.stop, item.step)
            if any(b is not None and not isinstance(b, int | np.integer) for b in bounds):
                raise ArgumentTypeError(
                    f"slice bounds must be Python ints or None, got {item!r}: a slice of a"
                    " graph value has a static shape; for a bound known only when the graph"
                    " runs, index with an integer Tensor (gather) or mask with where()"
                )
    if len(items) > len(shape):
        raise ShapeError(
            f"too many indices for a value of shape {list(shape)}: {len(items)} given,"
            f" it has {len(shape)} axes"
        )


def exact_scalar(value: Any, dtype: str) -> np.ndarray:
    """A Python or numpy number as a 0-d array of ``dtype`` (a tensor's, which it joins);
    a DTypeError where an integer or bool dtype would change it (1.5, inf, NaN, 2 as a
    bool, 2**70), since asgrad does not promote a tensor's dtype."""
    with np.errstate(all="ignore"):
        try:
            out = np.array(value).astype(dtype)
            same = is_float(dtype) or bool(out == np.array(value))
        except OverflowError:
            same = False
    if not same:
        raise DTypeError(
            f"{value!r} cannot join a {dtype} tensor unchanged (asgrad does not promote"
            f" dtypes); cast the tensor first, e.g. x.cast('float32')"
        )
    return out


def axis_tuple(axis: object) -> tuple[Any, ...]:
    """``axis`` (an int or a sequence of them) as a tuple, not yet checked."""
    if isinstance(axis, int | np.integer):
        return (axis,)
    if isinstance(axis, Sequence) and not isinstance(axis, str):
        return tuple(axis)
    raise ArgumentTypeError(f"axis must be an integer or a sequence of them, got {axis!r}")


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative, unique axes; None means every axis."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis_tuple(axis)
    out = tuple(sorted({int(normalize_axis(a, ndim)) for a in axes}))
    if len(out) != len(axes):
        raise ShapeError(f"axis {axis} repeats an axis")
    return out


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


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
