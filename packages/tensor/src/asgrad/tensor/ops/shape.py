"""Shape ops: reshape, transpose, broadcast, expand/squeeze, the ``*_like`` ops, concat.

The ``*_like`` ops take their target shape from a second input at run time (read
for its shape only), so that gradients work for any batch size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import (
    broadcast_shapes,
    normalize_axes,
    normalize_axis,
    randn,
    same_dtype,
)
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import (
    Attr,
    Attrs,
    CasesFn,
    InferFn,
    KernelFn,
    OpCase,
    OpDef,
    Shape,
    TensorType,
    register_op,
)


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


@accumulating
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


# -- concat ----------------------------------------------------------------------------------
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


def _concat_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        _c((randn(rng, 2, 3), randn(rng, 4, 3)), {"axis": 0}),
        _c((randn(rng, 2, 1), randn(rng, 2, 3), randn(rng, 2, 2)), {"axis": -1}),
    ]


def _shape_op(
    name: str,
    infer: InferFn,
    kernel: KernelFn,
    cases: CasesFn,
    doc: str,
    *,
    attrs: tuple[Attr, ...],
    identity_if_same_type: bool = False,
    result_shape_from_attrs: bool = False,
) -> None:
    """Register a one-input shape op: exact (tolerance 0), a view of its input."""
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
            attrs=attrs,
            identity_if_same_type=identity_if_same_type,
            result_shape_from_attrs=result_shape_from_attrs,
        )
    )


_shape_op(
    "reshape",
    _infer_reshape,
    _reshape,
    _reshape_cases,
    "new shape, same elements (one -1 allowed)",
    attrs=(Attr(name="shape", kind=tuple, doc="the new shape (one -1 allowed)"),),
    identity_if_same_type=True,
    result_shape_from_attrs=True,
)
_shape_op(
    "transpose",
    _infer_transpose,
    _transpose,
    _transpose_cases,
    "permute axes",
    attrs=(Attr(name="axes", kind=tuple, doc="the input axis of each result axis"),),
)
_shape_op(
    "broadcast_to",
    _infer_broadcast_to,
    _broadcast_to,
    _broadcast_to_cases,
    "broadcast to a shape",
    attrs=(Attr(name="shape", kind=tuple, doc="the shape broadcast to"),),
    identity_if_same_type=True,
    result_shape_from_attrs=True,
)
_shape_op(
    "expand_dims",
    _infer_expand_dims,
    _expand_dims,
    _expand_cases,
    "insert size-1 axes",
    attrs=(Attr(name="axis", kind=tuple, doc="where the new axes go, in the result"),),
)
_shape_op(
    "squeeze",
    _infer_squeeze,
    _squeeze,
    _squeeze_cases,
    "remove size-1 axes",
    attrs=(Attr(name="axis", kind=tuple, doc="the size-1 axes removed"),),
)
# The *_like ops read their target shape from the second input at run time.
for _name, _infer, _kernel, _doc in (
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
            name=_name,
            family="shape",
            infer=_infer,
            kernel=_kernel,
            arity=2,
            tolerance=(1e-5, 1e-6),
            cases=functools.partial(_like_cases, op=_name),
            doc=_doc,
            shape_only_inputs=(1,),
            identity_if_same_type=True,
            attrs=(),
        )
    )
register_op(
    OpDef(
        name="concat",
        family="shape",
        infer=_infer_concat,
        kernel=_concat,
        arity=None,
        tolerance=(0.0, 0.0),
        cases=_concat_cases,
        doc="join along an axis",
        attrs=(Attr(name="axis", kind=int, doc="the axis joined along"),),
    )
)
