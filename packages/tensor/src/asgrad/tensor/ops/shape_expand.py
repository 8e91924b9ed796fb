"""Shape ops that expand into other ops: flip, roll, tril/triu, diagonal, unfold
(``repeat`` and ``repeat_interleave`` are in `.shape_repeat`, ``pad`` in
`.shape_pad`).

Each is a short composition of slices, concats, reshapes, gathers of constant
indices and ``where`` (see "Ops that expand into others" in the contributing guide),
so its gradient and GPU kernels are those of the ops it builds. The compositions
keep the leading axis free where they can: slices count from the ends, and a reshape
puts ``-1`` on its leading axis, so a graph built for one batch size runs on another.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import FreeAxisError, ShapeError
from asgrad.tensor.ir.common import normalize_axes, normalize_axis, randn
from asgrad.tensor.ir.free_sizes import free_axes_of
from asgrad.tensor.ir.graph import user_location
from asgrad.tensor.ir.registry import (
    Attr,
    Attrs,
    CasesFn,
    InferFn,
    KernelFn,
    OpCase,
    OpDef,
    TensorType,
    expanding,
    register_op,
)
from asgrad.tensor.ir.retrace import mark_specialised

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


# -- helpers the expansions share ------------------------------------------------------
def apply(x: Tensor, op: str, *others: Tensor, **attrs: Any) -> Tensor:
    """``op(x, *others, **attrs)`` in ``x``'s graph."""
    return x.graph.apply(op, (x, *others), attrs)


def free_reshape(x: Tensor, shape: Sequence[int]) -> Tensor:
    """``x`` reshaped to ``shape``, with -1 on the leading axis so the batch may change
    (another free axis: the expansion is built again at the sizes fed)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    free = free_axes_of(x.node)
    if free is None or free - {0}:
        mark_specialised()
    if len(shape) >= 2 and math.prod(shape[1:]) > 0:
        shape = (-1, *shape[1:])
    elif len(shape) == 1:  # a flattening: right at any size
        shape = (-1,)
    return apply(x, "reshape", shape=shape)


def axis_slice(x: Tensor, axis: int, item: slice) -> Tensor:
    """``x[..., item, ...]`` with ``item`` at ``axis``."""
    return apply(x, "slice", index=(slice(None),) * axis + (item,))


def concat(parts: Sequence[Tensor], axis: int) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    return parts[0].graph.apply("concat", tuple(parts), {"axis": axis})


def refuse_free_axes(
    x: Tensor, axes: Sequence[int], why: str = "", *, specialise: bool = True
) -> None:
    """When one of ``axes`` of ``x`` follows a free input axis (or that is not known), the
    op being expanded is built for the declared size: with ``specialise`` it is marked so
    (a program traces it again at the sizes fed, `asgrad.tensor.ir.retrace`); otherwise
    (an op that fits no other size) a build-time [`FreeAxisError`][asgrad.tensor.FreeAxisError]."""
    free = free_axes_of(x.node)
    bad = sorted(set(free or ()) & {a % max(x.ndim, 1) for a in axes})
    if specialise and (bad or free is None) and mark_specialised():
        return
    if not bad:
        return
    op = expanding() or "this op"
    a = bad[0]
    raise FreeAxisError(
        f"{op}: axis {a} of its input {x.dtype}{list(x.shape)} follows a free axis of an"
        f" input (its size may change per run), but {op} {why or 'is built for its declared'}"
        f"{'' if why else f' size {x.shape[a]}'}. Declare that input axis fixed"
        " (g.input(..., free=...) without it), or apply the op along an axis that is not"
        f" free\n  (at {user_location()})"
    )


def fixed_axes(x: Tensor, axes: Sequence[int]) -> Tensor:
    """``x``, for an expansion built on constant index tables or reshapes for the declared
    sizes of ``axes``.

    When one of them follows a free axis the expansion is marked specialised (built
    again at the sizes fed, see `refuse_free_axes`). A graph that is not traced again
    (one loaded from a graph file, which refuses other sizes of its inputs when fed)
    keeps a run-time check too: a ``where`` with a constant
    condition of those sizes (1 on the other axes) makes another size a shape error
    naming the line, and leaves the other axes free.
    """
    refuse_free_axes(x, axes)
    shape = [1] * x.ndim
    for a in axes:
        shape[a] = x.shape[a]
    if all(d == 1 for d in shape):
        return x
    keep = x.graph.constant(np.ones(shape, bool), "bool")
    return x.graph.apply("where", (keep, x, x), {})


def gather_const(x: Tensor, indices: np.ndarray, axis: int) -> Tensor:
    """``numpy.take(x, indices, axis)`` for constant ``indices`` (computed for the
    declared size of ``axis``: see `fixed_axes`)."""
    idx = x.graph.constant(np.asarray(indices, np.int64), "int64")
    return apply(fixed_axes(x, (axis,)), "gather", idx, axis=axis)


def where_const(mask: np.ndarray, x: Tensor, fill: float | int | bool) -> Tensor:
    """``x`` where the constant ``mask`` (broadcast against it) holds, else ``fill``."""
    cond = x.graph.constant(np.asarray(mask, bool), "bool")
    return x.graph.apply("where", (cond, x, x.graph.constant(fill, x.dtype)), {})


# -- flip -------------------------------------------------------------------------------
def _infer_flip(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    normalize_axes(attrs["axis"], len(types[0].shape))
    return types[0]


def _flip(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    return np.flip(x, axis) if axis else x


def _expand_flip(x: Tensor, axis: tuple[int, ...]) -> Tensor:
    if not axis:
        return x
    axes = normalize_axes(axis, x.ndim)
    index = tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(max(axes) + 1))
    return apply(x, "slice", index=index)


# -- roll -------------------------------------------------------------------------------
def _infer_roll(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    shift, axis = tuple(attrs["shift"]), attrs["axis"]
    if axis is None:
        if len(shift) != 1:
            raise ShapeError(f"roll without axes takes one shift, got {list(shift)}")
    else:
        if len(shift) != len(axis):
            raise ShapeError(f"roll got {len(shift)} shifts for {len(axis)} axes; give one each")
        for a in axis:
            normalize_axis(a, len(t.shape))
    return t


def _roll(x: np.ndarray, shift: tuple[int, ...], axis: tuple[int, ...] | None) -> np.ndarray:
    return np.roll(x, shift[0] if axis is None else shift, axis)


def _roll_axis(x: Tensor, shift: int, axis: int) -> Tensor:
    n = x.shape[axis]
    s = shift % n if n else 0
    if not s:
        return x
    return concat(
        [axis_slice(x, axis, slice(-s, None)), axis_slice(x, axis, slice(None, -s))], axis
    )


def _expand_roll(x: Tensor, shift: tuple[int, ...], axis: tuple[int, ...] | None) -> Tensor:
    rolled = range(x.ndim) if axis is None else axis
    refuse_free_axes(x, tuple(rolled), "wraps it at its declared size")
    if axis is None:
        flat = _roll_axis(apply(x, "reshape", shape=(-1,)), shift[0], 0) if x.ndim else x
        return apply(flat, "reshape", shape=x.shape) if x.ndim != 1 else flat
    for s, a in zip(shift, axis, strict=True):
        x = _roll_axis(x, s, normalize_axis(a, x.ndim))
    return x


# -- tril / triu -------------------------------------------------------------------------
def _infer_tri(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if len(types[0].shape) < 2:
        raise ShapeError(f"needs a matrix (rank >= 2), got {types[0]}")
    return types[0]


def _tril(x: np.ndarray, diagonal: int) -> np.ndarray:
    return np.tril(x, diagonal)


def _triu(x: np.ndarray, diagonal: int) -> np.ndarray:
    return np.triu(x, diagonal)


def _tri_mask(n: int, m: int, diagonal: int, upper: bool) -> np.ndarray:
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    return cols - rows >= diagonal if upper else cols - rows <= diagonal


def _run_time_offsets(x: Tensor) -> Tensor:
    """``col - row`` for every position of ``x``'s last two axes, counted when the graph
    runs (so a free axis there may have any size): int32, broadcast against ``x``."""
    one = x.graph.constant(1, "int32")
    rows = apply(one, "broadcast_like", axis_slice(x, x.ndim - 1, slice(0, 1)))
    cols = apply(one, "broadcast_like", axis_slice(x, x.ndim - 2, slice(0, 1)))
    rows = apply(rows, "cumsum", axis=x.ndim - 2, reverse=False)
    cols = apply(cols, "cumsum", axis=x.ndim - 1, reverse=False)
    return cols - rows


def _tri(x: Tensor, diagonal: int, upper: bool) -> Tensor:
    free = free_axes_of(x.node)
    if free is not None and not free & {x.ndim - 2, x.ndim - 1}:  # a constant mask
        n, m = x.shape[-2:]
        return where_const(_tri_mask(n, m, diagonal, upper=upper), x, 0)
    offsets = _run_time_offsets(x)
    keep = offsets >= diagonal if upper else offsets <= diagonal
    return x.graph.apply("where", (keep, x, x.graph.constant(0, x.dtype)), {})


def _expand_tril(x: Tensor, diagonal: int) -> Tensor:
    return _tri(x, diagonal, upper=False)


def _expand_triu(x: Tensor, diagonal: int) -> Tensor:
    return _tri(x, diagonal, upper=True)


# -- diagonal ----------------------------------------------------------------------------
def _diag_parts(shape: tuple[int, ...], attrs: Attrs) -> tuple[int, int, int, int]:
    ndim = len(shape)
    if ndim < 2:
        raise ShapeError(f"diagonal needs rank >= 2, got shape {list(shape)}")
    a1 = normalize_axis(attrs["axis1"], ndim, "axis1")
    a2 = normalize_axis(attrs["axis2"], ndim, "axis2")
    if a1 == a2:
        raise ShapeError(f"axis1 and axis2 are both axis {a1}; give two different axes")
    off = int(attrs["offset"])
    n, m = shape[a1], shape[a2]
    length = max(0, min(n, m - off) if off >= 0 else min(n + off, m))
    return a1, a2, off, length


def _infer_diagonal(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    a1, a2, _, length = _diag_parts(t.shape, attrs)
    rest = tuple(d for i, d in enumerate(t.shape) if i not in (a1, a2))
    return TensorType((*rest, length), t.dtype)


def _diagonal(x: np.ndarray, offset: int, axis1: int, axis2: int) -> np.ndarray:
    return np.diagonal(x, offset, axis1, axis2).copy()


def _expand_diagonal(x: Tensor, offset: int, axis1: int, axis2: int) -> Tensor:
    attrs = {"offset": offset, "axis1": axis1, "axis2": axis2}
    a1, a2, off, length = _diag_parts(x.shape, attrs)
    free = free_axes_of(x.node)
    if free is not None and len(free & {a1, a2}) == 1:
        return _diagonal_along_free(x, a1, a2, off, free)
    x = fixed_axes(x, (a1, a2))  # the flat positions below are for the declared sizes
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    perm = (*rest, a1, a2)
    if perm != tuple(range(x.ndim)):
        x = apply(x, "transpose", axes=perm)
    n, m = x.shape[-2:]
    flat = free_reshape(x, (*x.shape[:-2], n * m))
    start = off if off >= 0 else -off * m
    item = slice(0, 0) if length == 0 else slice(start, start + (length - 1) * (m + 1) + 1, m + 1)
    return axis_slice(flat, flat.ndim - 1, item)


def _diagonal_along_free(x: Tensor, a1: int, a2: int, off: int, free: frozenset[int]) -> Tensor:
    """The diagonal when one of its axes is free: the elements off the diagonal masked
    to zero and summed away along the fixed axis, then the free axis cut to the
    diagonal's positions (slice bounds past the fed size are clipped, as numpy's)."""
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    perm = (*rest, a1, a2)
    if perm != tuple(range(x.ndim)):
        x = apply(x, "transpose", axes=perm)
    n, m = x.shape[-2:]
    dtype = x.dtype
    if dtype == "bool":
        x = apply(x, "cast", dtype="int32")
    on = _run_time_offsets(x) == off
    picked = x.graph.apply("where", (on, x, x.graph.constant(0, x.dtype)), {})
    if a1 in free:  # rows free: sum the columns, keep row i = x[i, i + off]
        line = picked.sum(axis=-1)
        item = slice(0, max(m - off, 0)) if off >= 0 else slice(-off, m - off)
    else:  # columns free: sum the rows, keep column j = x[j - off, j]
        line = picked.sum(axis=-2)
        item = slice(off, off + n) if off >= 0 else slice(0, max(n + off, 0))
    line = axis_slice(line, line.ndim - 1, item)
    return line if line.dtype == dtype else apply(line, "cast", dtype=dtype)


# -- unfold (torch Tensor.unfold) -------------------------------------------------------------
def _infer_unfold(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axis = normalize_axis(attrs["axis"], len(t.shape))
    size, step = int(attrs["size"]), int(attrs["step"])
    n = t.shape[axis]
    if step <= 0:
        raise ShapeError(f"unfold step must be positive, got {step}")
    if not 0 <= size <= n:
        raise ShapeError(f"unfold size {size} does not fit axis {axis} of size {n}")
    windows = (n - size) // step + 1
    return TensorType((*t.shape[:axis], windows, *t.shape[axis + 1 :], size), t.dtype)


def _unfold(x: np.ndarray, axis: int, size: int, step: int) -> np.ndarray:
    view = np.lib.stride_tricks.sliding_window_view(x, size, axis)
    index = (slice(None),) * (axis % x.ndim) + (slice(None, None, step),)
    return view[index].copy()


def _expand_unfold(x: Tensor, axis: int, size: int, step: int) -> Tensor:
    axis = normalize_axis(axis, x.ndim)
    free = free_axes_of(x.node)
    if size > 0 and free is not None and axis in free:  # windows of any fed size
        parts = [axis_slice(x, axis, slice(k, k - size + 1)) for k in range(size - 1)]
        # the last window's end, x[size-1], gathered: a fed size below `size` is an
        # OutOfRangeError, not zero windows
        zero = x.graph.constant(np.zeros(1, np.int64), "int64")
        end = apply(axis_slice(x, axis, slice(size - 1, size)), "gather", zero, axis=axis)
        parts.append(concat([end, axis_slice(x, axis, slice(size, None))], axis))
        shifted = [apply(p, "expand_dims", axis=(x.ndim,)) for p in parts]
        return axis_slice(concat(shifted, x.ndim), axis, slice(None, None, step))
    n = x.shape[axis]
    windows = (n - size) // step + 1
    idx = np.arange(windows)[:, None] * step + np.arange(size)[None, :]
    y = gather_const(x, idx, axis)  # x.shape[:axis] + (windows, size) + x.shape[axis+1:]
    perm = (*range(axis + 1), *range(axis + 2, y.ndim), axis + 1)
    return apply(y, "transpose", axes=perm) if perm != tuple(range(y.ndim)) else y


# -- cases ----------------------------------------------------------------------------------
def _flip_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 4, 2)
    return [
        OpCase((x,), {"axis": (0,)}),
        OpCase((x,), {"axis": (0, 2)}),
        OpCase((x,), {"axis": ()}),
    ]


def _roll_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 4, 5)
    return [
        OpCase((x,), {"shift": (2,), "axis": (1,)}),
        OpCase((x,), {"shift": (-1, 7), "axis": (0, 1)}),
        OpCase((x,), {"shift": (3,), "axis": None}),
        OpCase((x,), {"shift": (5,), "axis": (1,)}, label="full turn"),
    ]


def _tri_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 4, 5),), {"diagonal": 0}),
        OpCase((randn(rng, 2, 3, 3),), {"diagonal": -1}),
        OpCase((randn(rng, 3, 4),), {"diagonal": 2}),
    ]


def _diagonal_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 4, 4),), {"offset": 0, "axis1": 0, "axis2": 1}),
        OpCase((randn(rng, 3, 5),), {"offset": 1, "axis1": 0, "axis2": 1}),
        OpCase((randn(rng, 2, 4, 3),), {"offset": -1, "axis1": 1, "axis2": 2}),
        OpCase((randn(rng, 4, 2, 3),), {"offset": 0, "axis1": 2, "axis2": 0}),
        OpCase((randn(rng, 3, 3),), {"offset": 5, "axis1": 0, "axis2": 1}, label="empty"),
    ]


def _unfold_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 7),), {"axis": 0, "size": 3, "step": 2}),
        OpCase((randn(rng, 2, 6, 3),), {"axis": 1, "size": 2, "step": 1}),
        OpCase((randn(rng, 2, 5),), {"axis": -1, "size": 5, "step": 3}),
    ]


def shape_expand_op(
    name: str,
    infer: InferFn,
    kernel: KernelFn,
    cases: CasesFn,
    doc: str,
    expand: Any,
    attrs: tuple[Attr, ...],
) -> None:
    """Register an exact op of the shape family that expands into others."""
    register_op(
        OpDef(
            name=name,
            family="shape",
            infer=infer,
            kernel=kernel,
            arity=1,
            tolerance=(0.0, 0.0),
            cases=cases,
            doc=doc,
            expand=expand,
            attrs=attrs,
        )
    )


_DIAGONAL = (Attr(name="diagonal", kind=int, doc="offset of the diagonal kept"),)
shape_expand_op(
    "flip",
    _infer_flip,
    _flip,
    _flip_cases,
    "reverse axes",
    _expand_flip,
    (Attr(name="axis", kind=tuple, doc="the axes reversed"),),
)
shape_expand_op(
    "roll",
    _infer_roll,
    _roll,
    _roll_cases,
    "rotate along axes",
    _expand_roll,
    (
        Attr(name="shift", kind=tuple, doc="the shift along each axis"),
        Attr(name="axis", kind=tuple, default=None, optional=True, doc="None: the flat value"),
    ),
)
shape_expand_op(
    "tril", _infer_tri, _tril, _tri_cases, "lower triangle (offset)", _expand_tril, _DIAGONAL
)
shape_expand_op(
    "triu", _infer_tri, _triu, _tri_cases, "upper triangle (offset)", _expand_triu, _DIAGONAL
)
shape_expand_op(
    "diagonal",
    _infer_diagonal,
    _diagonal,
    _diagonal_cases,
    "a diagonal of two axes (offset), as a new last axis",
    _expand_diagonal,
    (
        Attr(name="offset", kind=int, doc="above (>0) or below (<0) the main one"),
        Attr(name="axis1", kind=int, doc="the rows' axis"),
        Attr(name="axis2", kind=int, doc="the columns' axis"),
    ),
)
shape_expand_op(
    "unfold",
    _infer_unfold,
    _unfold,
    _unfold_cases,
    "sliding windows along an axis, as a new last axis",
    _expand_unfold,
    (
        Attr(name="axis", kind=int, doc="the axis windowed"),
        Attr(name="size", kind=int, doc="the window's length"),
        Attr(name="step", kind=int, doc="the distance between windows"),
    ),
)
