"""``repeat`` (PyTorch's ``Tensor.repeat``, numpy's ``tile``) and ``repeat_interleave``:
shape ops that expand into concats (a few copies), a broadcasting ``where`` (many), a
reshape that keeps the batch axis free, or a gather of constant indices (per-element
counts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import normalize_axis, randn
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, TensorType
from asgrad.tensor.ops.shape_expand import (
    apply,
    axis_slice,
    concat,
    free_reshape,
    gather_const,
    refuse_free_axes,
    shape_expand_op,
)

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


# -- repeat (torch Tensor.repeat, numpy tile) ---------------------------------------------
def _infer_repeat(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    reps = tuple(int(r) for r in attrs["repeats"])
    if len(reps) < len(t.shape):
        raise ShapeError(
            f"repeat got {len(reps)} repeats for a value of rank {len(t.shape)}; give at"
            " least one per axis (tile() pads them with leading 1s)"
        )
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeats must be >= 0, got {list(reps)}")
    shape = (1,) * (len(reps) - len(t.shape)) + t.shape
    return TensorType(tuple(d * r for d, r in zip(shape, reps, strict=True)), t.dtype)


def _repeat(x: np.ndarray, repeats: tuple[int, ...]) -> np.ndarray:
    return np.tile(x, repeats)


# Up to this many copies are a concat; more, one broadcasting ``where`` and a reshape.
MAX_CONCAT_COPIES = 8


def copies(x: Tensor, r: int, axis: int) -> Tensor:
    """``r`` copies of ``x`` along a new axis ``axis`` (the batch axis stays free)."""
    x = apply(x, "expand_dims", axis=(axis,))
    if r <= MAX_CONCAT_COPIES:
        return concat([x] * r, axis)
    shape = [1] * x.ndim
    shape[axis] = r
    cond = x.graph.constant(np.ones(shape, bool), "bool")  # exact: where copies bits
    return x.graph.apply("where", (cond, x, x), {})


def _expand_repeat(x: Tensor, repeats: tuple[int, ...]) -> Tensor:
    lead = len(repeats) - x.ndim
    if lead:
        x = apply(x, "expand_dims", axis=tuple(range(lead)))
    for axis, r in enumerate(repeats):
        if r == 0:
            x = axis_slice(x, axis, slice(0, 0))
        elif r > MAX_CONCAT_COPIES and x.shape[axis] > 0:
            merged = (*x.shape[:axis], r * x.shape[axis], *x.shape[axis + 1 :])
            x = free_reshape(copies(x, r, axis), merged)
        elif r > 1:
            x = concat([x] * r, axis)
    return x


# -- repeat_interleave ---------------------------------------------------------------------
def _infer_repeat_interleave(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axis = normalize_axis(attrs["axis"], len(t.shape))
    reps = tuple(int(r) for r in attrs["repeats"])
    n = t.shape[axis]
    if len(reps) not in (1, n):
        raise ShapeError(f"repeat_interleave got {len(reps)} repeats for axis {axis} of size {n}")
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeats must be >= 0, got {list(reps)}")
    total = n * reps[0] if len(reps) == 1 else sum(reps)
    return TensorType((*t.shape[:axis], total, *t.shape[axis + 1 :]), t.dtype)


def _repeat_interleave(x: np.ndarray, repeats: tuple[int, ...], axis: int) -> np.ndarray:
    return np.repeat(x, repeats[0] if len(repeats) == 1 else repeats, axis)


def _expand_repeat_interleave(x: Tensor, repeats: tuple[int, ...], axis: int) -> Tensor:
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if len(repeats) == 1 and repeats[0] > 0 and n > 0:
        r = repeats[0]
        if r == 1:
            return x
        y = copies(x, r, axis + 1)
        return free_reshape(y, (*x.shape[:axis], n * r, *x.shape[axis + 1 :]))
    if len(repeats) > 1:  # one count per element: for the declared size only
        refuse_free_axes(x, (axis,), "takes one repeat count per element", specialise=False)
    reps = repeats * n if len(repeats) == 1 else repeats
    return gather_const(x, np.repeat(np.arange(n), reps), axis)


def _repeat_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 3),), {"repeats": (2, 3)}),
        OpCase((randn(rng, 3),), {"repeats": (2, 1, 2)}),
        OpCase((randn(rng, 2, 2),), {"repeats": (1, 0)}, grad=False, label="zero"),
        OpCase((randn(rng, 2, 3),), {"repeats": (3, 11)}, label="many copies"),
    ]


def _repeat_interleave_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 2, 3),), {"repeats": (2,), "axis": 1}),
        OpCase((randn(rng, 3, 2),), {"repeats": (1, 0, 3), "axis": 0}),
        OpCase((randn(rng, 4),), {"repeats": (3,), "axis": 0}),
        OpCase((randn(rng, 2, 3),), {"repeats": (10,), "axis": 1}, label="many copies"),
    ]


shape_expand_op(
    "repeat",
    _infer_repeat,
    _repeat,
    _repeat_cases,
    "tile whole copies",
    _expand_repeat,
    (Attr(name="repeats", kind=tuple, doc="copies along each axis"),),
)
shape_expand_op(
    "repeat_interleave",
    _infer_repeat_interleave,
    _repeat_interleave,
    _repeat_interleave_cases,
    "repeat each element along an axis",
    _expand_repeat_interleave,
    (
        Attr(name="repeats", kind=tuple, doc="copies of each element (one for all, or each's)"),
        Attr(name="axis", kind=int, doc="the axis repeated along"),
    ),
)
