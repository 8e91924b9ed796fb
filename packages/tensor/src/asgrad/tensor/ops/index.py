"""Index ops: basic slicing, gather (embedding lookup), one-hot, and their scatters.

``scatter_slice(g, x)`` and ``scatter_add(g, indices, x)`` are the gradients of
``slice`` and ``gather``: zeros shaped like ``x`` (read for its shape only) with
``g`` written or added at the indices.

The ops that take an integer index array (``gather``, ``scatter_add``, ``one_hot``)
accept indices in ``[0, n)`` only: a negative index is an error, not a count from the
end (as PyTorch's ``gather`` and ``embedding``), and every kernel checks its indices
with `check_indices` before it reads anything.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import DTypeError, OutOfRangeError, ShapeError
from asgrad.tensor.ir.common import normalize_axis, randn
from asgrad.tensor.ir.dtypes import accumulating, as_dtype, is_int
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, Shape, TensorType, register_op

Index = tuple[int | slice, ...]


def sliced_shape(shape: Shape, index: Index) -> Shape:
    if len(index) > len(shape):
        raise ShapeError(f"too many indices ({len(index)}) for a value of rank {len(shape)}")
    out: list[int] = []
    for i, (item, size) in enumerate(zip(index, shape, strict=False)):
        if isinstance(item, slice):
            if item.step == 0:
                raise ShapeError("slice step cannot be zero")
            out.append(len(range(*item.indices(size))))
        elif not -size <= item < size:
            raise ShapeError(f"index {item} is out of bounds for axis {i} with size {size}")
    out.extend(shape[len(index) :])
    return tuple(out)


def _infer_slice(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(sliced_shape(types[0].shape, attrs["index"]), types[0].dtype)


def _slice(x: np.ndarray, index: Index) -> np.ndarray:
    return x[index]


def _infer_scatter_slice(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    expected = sliced_shape(x.shape, attrs["index"])
    if g.shape != expected:
        raise ShapeError(f"slice gradient {g} does not match the slice shape {list(expected)}")
    return TensorType(x.shape, g.dtype)


def _scatter_slice(
    g: np.ndarray, x: np.ndarray, index: Index, out: np.ndarray | None = None
) -> np.ndarray:
    """Zeros shaped like ``x`` with ``g`` at ``index``; into ``out`` when given."""
    if out is None:
        out = np.zeros(x.shape, dtype=g.dtype)
    else:
        out[...] = 0
    out[index] = g
    return out


def check_indices(op: str, indices: np.ndarray, n: int, what: str, hint: str = "") -> None:
    """Raise [`OutOfRangeError`][asgrad.tensor.OutOfRangeError] unless every element of ``indices``
    is in ``[0, n)``.

    One pass over the array: seen as unsigned integers of the same width, negative
    indices are larger than any valid one, so the maximum alone decides. The message
    names ``op``, an offending value and the valid range; ``what`` says what ``n``
    counts (``"axis 0 of size 5"``, ``"depth 3"``); ``hint`` ends the message.
    """
    flat = np.asarray(indices)
    if flat.size == 0:
        return
    if int(flat.view(f"u{flat.dtype.itemsize}").max()) < n:
        return
    low, high = int(flat.min()), int(flat.max())
    bad = low if low < 0 else high
    valid = f"the valid range is [0, {n - 1}]" if n > 0 else "no index is valid"
    if bad < 0:
        valid += ": a negative index is an error, not a count from the end"
    raise OutOfRangeError(
        f"{op}: index {bad} is out of range for {what} (the indices range over"
        f" [{low}, {high}]); {valid}{hint}"
    )


def _infer_gather(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, idx = types
    if not is_int(idx.dtype):
        raise DTypeError(f"indices must be int32 or int64, got {idx}")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1 :], x.dtype)


def _gather(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    check_indices("gather", indices, x.shape[axis], f"axis {axis} of size {x.shape[axis]}")
    if axis == 0:
        out: np.ndarray = x[indices]
        return out
    return np.take(x, indices, axis=axis)


def _infer_scatter_add(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, idx, x = types
    expected = _infer_gather([x, idx], attrs)
    if g.shape != expected.shape:
        raise ShapeError(
            f"gather gradient {g} does not match the gather shape {list(expected.shape)}"
        )
    return TensorType(x.shape, g.dtype)


def _scatter_add(g: np.ndarray, indices: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    check_indices("scatter_add", indices, n, f"axis {axis} of size {n}")
    out = np.zeros(x.shape, dtype=g.dtype)
    if axis == 0 and indices.ndim == 1 and x.ndim == 2:
        # One bincount per column is much faster than np.add.at for embeddings.
        flat = (indices[:, None] * x.shape[1] + np.arange(x.shape[1])).ravel()
        out += (
            np.bincount(flat, weights=g.ravel(), minlength=n * x.shape[1])
            .reshape(x.shape)
            .astype(g.dtype)
        )
        return out
    moved = np.moveaxis(out, axis, 0)
    gm = np.moveaxis(g, tuple(range(axis, axis + indices.ndim)), tuple(range(indices.ndim)))
    np.add.at(moved, indices, gm)
    return out


def _infer_one_hot(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (idx,) = types
    if not is_int(idx.dtype):
        raise DTypeError(f"one_hot needs integer indices, got {idx}")
    depth = int(attrs["depth"])
    if depth <= 0:
        raise ShapeError(f"one_hot depth must be positive, got {depth}")
    return TensorType((*idx.shape, depth), as_dtype(attrs["dtype"]))


def _one_hot(indices: np.ndarray, depth: int, dtype: str) -> np.ndarray:
    hint = "; a loss's class labels must be in this range or equal its ignore_index"
    check_indices("one_hot", indices, depth, f"depth {depth}", hint)
    out: np.ndarray = (indices[..., None] == np.arange(depth)).astype(dtype)
    return out


# -- cases ---------------------------------------------------------------------------------------
def _slice_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 4, 5, 3)
    return [
        OpCase((x,), {"index": (slice(1, 3),)}),
        OpCase((x,), {"index": (slice(None), slice(0, 5, 2), 1)}),
        OpCase((x,), {"index": (2, slice(None, None, -1))}),
    ]


def _scatter_slice_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 4, 5)
    return [
        OpCase((randn(rng, 2, 5), x), {"index": (slice(1, 3),)}, wrt=(0,)),
        OpCase((randn(rng, 4), x), {"index": (slice(None), 2)}, wrt=(0,)),
    ]


def _gather_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 6, 3), rng.integers(0, 6, (4,))), {"axis": 0}, wrt=(0,)),
        OpCase((randn(rng, 6, 3), rng.integers(0, 6, (2, 5))), {"axis": 0}, wrt=(0,)),
        OpCase((randn(rng, 2, 5, 3), rng.integers(0, 5, (4,))), {"axis": 1}, wrt=(0,)),
    ]


def _scatter_add_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase(
            (randn(rng, 4, 3), rng.integers(0, 6, (4,)), randn(rng, 6, 3)), {"axis": 0}, wrt=(0,)
        ),
        OpCase(
            (randn(rng, 2, 4, 3), rng.integers(0, 5, (4,)), randn(rng, 2, 5, 3)),
            {"axis": 1},
            wrt=(0,),
        ),
    ]


def _one_hot_cases(rng: np.random.Generator) -> list[OpCase]:
    return [OpCase((rng.integers(0, 5, (3, 2)),), {"depth": 5}, grad=False)]


register_op(
    OpDef(
        name="slice",
        attrs=(Attr(name="index", kind=tuple, doc="ints, slices and None, one per axis"),),
        family="index",
        infer=_infer_slice,
        kernel=_slice,
        arity=1,
        tolerance=(0.0, 0.0),
        cases=_slice_cases,
        doc="basic indexing with ints and slices",
    )
)
register_op(
    OpDef(
        name="scatter_slice",
        attrs=(Attr(name="index", kind=tuple, doc="the slice written (as slice)"),),
        family="index",
        infer=_infer_scatter_slice,
        kernel=_scatter_slice,
        arity=2,
        tolerance=(0.0, 0.0),
        cases=_scatter_slice_cases,
        doc="zeros shaped like x with g written at a slice",
        shape_only_inputs=(1,),
        ties_free_axes=True,
        fresh_result=True,
        writes_out=True,
    )
)
register_op(
    OpDef(
        name="gather",
        attrs=(Attr(name="axis", kind=int, doc="the axis indexed"),),
        family="index",
        infer=_infer_gather,
        kernel=_gather,
        arity=2,
        tolerance=(0.0, 0.0),
        cases=_gather_cases,
        doc="take indices in [0, n) along an axis (embedding lookup); others raise",
    )
)
register_op(
    OpDef(
        name="scatter_add",
        attrs=(Attr(name="axis", kind=int, doc="the axis indexed"),),
        family="index",
        infer=_infer_scatter_add,
        kernel=accumulating(_scatter_add),
        arity=3,
        tolerance=(1e-5, 1e-6),
        cases=_scatter_add_cases,
        doc="add g into zeros shaped like x at indices in [0, n) (gather's gradient)",
        shape_only_inputs=(2,),
        fresh_result=True,
    )
)
register_op(
    OpDef(
        name="one_hot",
        attrs=(
            Attr(name="depth", kind=int, doc="the number of classes"),
            Attr(name="dtype", kind=str, default="float32", doc="the result dtype"),
        ),
        family="index",
        infer=_infer_one_hot,
        kernel=_one_hot,
        arity=1,
        differentiable=False,
        tolerance=(0.0, 0.0),
        cases=_one_hot_cases,
        doc="one-hot encode integer indices in [0, depth); others raise",
        fresh_result=True,
    )
)
