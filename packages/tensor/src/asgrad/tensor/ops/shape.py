"""Shape and indexing ops: reshape, transpose, broadcast, slicing, concat, gather."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.dtypes import as_dtype, is_int
from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ops._common import (
    broadcast_shapes,
    normalize_axes,
    normalize_axis,
    randn,
    same_dtype,
)
from asgrad.tensor.registry import Attrs, OpCase, OpDef, Shape, TensorType, register_op


# -- reshape family ---------------------------------------------------------------------
def resolve_reshape(src: Shape, target: Sequence[int]) -> Shape:
    """The shape ``target`` means for a value of shape ``src`` (one -1 allowed)."""
    target = tuple(int(d) for d in target)
    if sum(d == -1 for d in target) > 1:
        raise ShapeError(f"reshape target {list(target)} has more than one -1")
    if any(d < -1 for d in target):
        raise ShapeError(f"reshape target {list(target)} has a negative size")
    size = math.prod(src)
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or size % known:
            raise ShapeError(
                f"cannot reshape {list(src)} ({size} elements) into {list(target)}:"
                f" {size} is not a multiple of {known}"
            )
        target = tuple(size // known if d == -1 else d for d in target)
    elif known != size:
        raise ShapeError(
            f"cannot reshape {list(src)} ({size} elements) into {list(target)}"
            f" ({known} elements); the element counts must match (use -1 for one axis)"
        )
    return target


def _infer_reshape(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(resolve_reshape(types[0].shape, attrs["shape"]), types[0].dtype)


def _reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.reshape(x, shape)


def _infer_transpose(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axes = tuple(attrs["axes"])
    if sorted(normalize_axis(a, len(t.shape)) for a in axes) != list(range(len(t.shape))):
        raise ShapeError(
            f"axes {list(axes)} are not a permutation of the {len(t.shape)} axes of {t}"
        )
    return TensorType(tuple(t.shape[a] for a in axes), t.dtype)


def _transpose(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    return np.transpose(x, axes)


def _infer_broadcast_to(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    shape = tuple(int(d) for d in attrs["shape"])
    if len(shape) < len(t.shape) or broadcast_shapes(t.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast {t} to {list(shape)}")
    return TensorType(shape, t.dtype)


def _broadcast_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(x, shape)


def _infer_expand_dims(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    ndim = len(t.shape) + len(attrs["axis"])
    axes = normalize_axes(attrs["axis"], ndim)
    shape = list(t.shape)
    for a in axes:
        shape.insert(a, 1)
    return TensorType(tuple(shape), t.dtype)


def _expand_dims(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    return np.expand_dims(x, axis)


def _infer_squeeze(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = types
    axes = normalize_axes(attrs["axis"], len(t.shape))
    for a in axes:
        if t.shape[a] != 1:
            raise ShapeError(f"cannot squeeze axis {a} of {t}: its size is {t.shape[a]}, not 1")
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)


def _squeeze(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    return np.squeeze(x, axis)


# -- *_like ops: shapes read at run time, so gradients work for any batch size ----------
def _infer_like(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[1].shape, types[0].dtype)


def _infer_sum_to_like(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    if broadcast_shapes(g.shape, x.shape) != g.shape:
        raise ShapeError(f"cannot sum {g} down to the shape of {x}")
    return _infer_like(types, attrs)


def sum_to_shape(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over the axes that broadcasting added or stretched to reach it."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1
    )
    return np.sum(g, axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)


def _sum_to_like(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return sum_to_shape(g, x.shape)


def _infer_broadcast_like(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    if broadcast_shapes(g.shape, x.shape) != x.shape:
        raise ShapeError(f"cannot broadcast {g} to the shape of {x}")
    return _infer_like(types, attrs)


def _broadcast_like(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(g, x.shape)


def _infer_reshape_like(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    if math.prod(g.shape) != math.prod(x.shape):
        raise ShapeError(f"cannot reshape {g} to the shape of {x}")
    return _infer_like(types, attrs)


def _reshape_like(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.reshape(g, x.shape)


# -- slicing ---------------------------------------------------------------------------------
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
    return _infer_like(types, attrs)


def _scatter_slice(g: np.ndarray, x: np.ndarray, index: Index) -> np.ndarray:
    out = np.zeros(x.shape, dtype=g.dtype)
    out[index] = g
    return out


# -- concat, gather, one_hot ----------------------------------------------------------------
def _infer_concat(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if not types:
        raise ShapeError("concat needs at least one value")
    dtype = same_dtype(types)
    ndim = len(types[0].shape)
    if ndim == 0:
        raise ShapeError("cannot concatenate scalars; reshape them to rank 1 first")
    axis = normalize_axis(attrs["axis"], ndim)
    for t in types:
        if len(t.shape) != ndim or any(
            a != b
            for i, (a, b) in enumerate(zip(t.shape, types[0].shape, strict=True))
            if i != axis
        ):
            shown = ", ".join(str(list(t.shape)) for t in types)
            raise ShapeError(f"shapes {shown} differ outside the concat axis {axis}")
    shape = list(types[0].shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return TensorType(tuple(shape), dtype)


def _concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def _infer_gather(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, idx = types
    if not is_int(idx.dtype):
        raise DTypeError(f"indices must be int32 or int64, got {idx}")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1 :], x.dtype)


def _gather(x: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
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
    out = np.zeros(x.shape, dtype=g.dtype)
    if axis == 0 and indices.ndim == 1 and x.ndim == 2:
        # One bincount per column is much faster than np.add.at for embeddings.
        n = x.shape[0]
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
    return TensorType((*idx.shape, depth), as_dtype(attrs.get("dtype", "float32")))


def _one_hot(indices: np.ndarray, depth: int, dtype: str = "float32") -> np.ndarray:
    out: np.ndarray = (indices[..., None] == np.arange(depth)).astype(dtype)
    return out


# -- cases ---------------------------------------------------------------------------------------
def _c(inputs: tuple[np.ndarray, ...], attrs: dict[str, Any], **kw: Any) -> OpCase:
    return OpCase(inputs, attrs, **kw)


def _reshape_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 2, 6),), {"shape": (3, 4)}),
        _c((randn(rng, 2, 3, 4),), {"shape": (-1, 4)}),
    ]


def _transpose_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 3, 4),), {"axes": (1, 0)}),
        _c((randn(rng, 2, 3, 4),), {"axes": (2, 0, 1)}),
    ]


def _broadcast_to_cases(rng: np.random.Generator) -> list[OpCase]:
    return [_c((randn(rng, 3, 1),), {"shape": (2, 3, 4)}), _c((randn(rng),), {"shape": (2, 2)})]


def _expand_cases(rng: np.random.Generator) -> list[OpCase]:
    return [_c((randn(rng, 3, 4),), {"axis": (0,)}), _c((randn(rng, 3),), {"axis": (0, 2)})]


def _squeeze_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 3, 1, 4),), {"axis": (1,)}),
        _c((randn(rng, 1, 3, 1),), {"axis": (0, 2)}),
    ]


def _like_cases(rng: np.random.Generator, op: str) -> list[OpCase]:
    if op == "sum_to_like":
        pairs = [((2, 3, 4), (3, 1)), ((3, 4), (3, 4)), ((2, 5), ())]
    elif op == "broadcast_like":
        pairs = [((3, 1), (2, 3, 4)), ((), (2, 2))]
    else:
        pairs = [((2, 6), (3, 4)), ((12,), (2, 2, 3))]
    return [_c((randn(rng, *a), randn(rng, *b)), {}, wrt=(0,)) for a, b in pairs]


def _slice_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 4, 5, 3)
    return [
        _c((x,), {"index": (slice(1, 3),)}),
        _c((x,), {"index": (slice(None), slice(0, 5, 2), 1)}),
        _c((x,), {"index": (2, slice(None, None, -1))}),
    ]


def _scatter_slice_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 4, 5)
    return [
        _c((randn(rng, 2, 5), x), {"index": (slice(1, 3),)}, wrt=(0,)),
        _c((randn(rng, 4), x), {"index": (slice(None), 2)}, wrt=(0,)),
    ]


def _concat_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 2, 3), randn(rng, 4, 3)), {"axis": 0}),
        _c((randn(rng, 2, 1), randn(rng, 2, 3), randn(rng, 2, 2)), {"axis": -1}),
    ]


def _gather_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 6, 3), rng.integers(0, 6, (4,))), {"axis": 0}, wrt=(0,)),
        _c((randn(rng, 6, 3), rng.integers(0, 6, (2, 5))), {"axis": 0}, wrt=(0,)),
        _c((randn(rng, 2, 5, 3), rng.integers(0, 5, (4,))), {"axis": 1}, wrt=(0,)),
    ]


def _scatter_add_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 4, 3), rng.integers(0, 6, (4,)), randn(rng, 6, 3)), {"axis": 0}, wrt=(0,)),
        _c(
            (randn(rng, 2, 4, 3), rng.integers(0, 5, (4,)), randn(rng, 2, 5, 3)),
            {"axis": 1},
            wrt=(0,),
        ),
    ]


def _one_hot_cases(rng: np.random.Generator) -> list[OpCase]:
    return [_c((rng.integers(0, 5, (3, 2)),), {"depth": 5}, grad=False)]


register_op(
    OpDef(
        "reshape",
        "shape",
        _infer_reshape,
        _reshape,
        1,
        True,
        (0.0, 0.0),
        _reshape_cases,
        doc="new shape, same elements (one -1 allowed)",
    )
)
register_op(
    OpDef(
        "transpose",
        "shape",
        _infer_transpose,
        _transpose,
        1,
        True,
        (0.0, 0.0),
        _transpose_cases,
        doc="permute axes",
    )
)
register_op(
    OpDef(
        "broadcast_to",
        "shape",
        _infer_broadcast_to,
        _broadcast_to,
        1,
        True,
        (0.0, 0.0),
        _broadcast_to_cases,
        doc="broadcast to a shape",
    )
)
register_op(
    OpDef(
        "expand_dims",
        "shape",
        _infer_expand_dims,
        _expand_dims,
        1,
        True,
        (0.0, 0.0),
        _expand_cases,
        doc="insert size-1 axes",
    )
)
register_op(
    OpDef(
        "squeeze",
        "shape",
        _infer_squeeze,
        _squeeze,
        1,
        True,
        (0.0, 0.0),
        _squeeze_cases,
        doc="remove size-1 axes",
    )
)
for _op, _infer, _kernel, _doc in (
    (
        "sum_to_like",
        _infer_sum_to_like,
        _sum_to_like,
        "sum a gradient down to a shape (broadcast reverse)",
    ),
    (
        "broadcast_like",
        _infer_broadcast_like,
        _broadcast_like,
        "broadcast to the shape of another value",
    ),
    ("reshape_like", _infer_reshape_like, _reshape_like, "reshape to the shape of another value"),
):
    register_op(
        OpDef(
            _op,
            "shape",
            _infer,
            _kernel,
            2,
            True,
            (1e-5, 1e-6),
            functools.partial(_like_cases, op=_op),
            doc=_doc,
        )
    )
register_op(
    OpDef(
        "slice",
        "index",
        _infer_slice,
        _slice,
        1,
        True,
        (0.0, 0.0),
        _slice_cases,
        doc="basic indexing with ints and slices",
    )
)
register_op(
    OpDef(
        "scatter_slice",
        "index",
        _infer_scatter_slice,
        _scatter_slice,
        2,
        True,
        (0.0, 0.0),
        _scatter_slice_cases,
        doc="zeros shaped like x with g written at a slice",
    )
)
register_op(
    OpDef(
        "concat",
        "shape",
        _infer_concat,
        _concat,
        None,
        True,
        (0.0, 0.0),
        _concat_cases,
        doc="join along an axis",
    )
)
register_op(
    OpDef(
        "gather",
        "index",
        _infer_gather,
        _gather,
        2,
        True,
        (0.0, 0.0),
        _gather_cases,
        doc="take indices along an axis (embedding lookup)",
    )
)
register_op(
    OpDef(
        "scatter_add",
        "index",
        _infer_scatter_add,
        _scatter_add,
        3,
        True,
        (1e-5, 1e-6),
        _scatter_add_cases,
        doc="add g into zeros shaped like x at indices (gather's gradient)",
    )
)
register_op(
    OpDef(
        "one_hot",
        "index",
        _infer_one_hot,
        _one_hot,
        1,
        False,
        (0.0, 0.0),
        _one_hot_cases,
        doc="one-hot encode integer indices",
    )
)
