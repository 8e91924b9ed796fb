"""The shape/dtype rules of the elementwise ops (`asgrad.tensor.ops.elementwise`,
`asgrad.tensor.ops._elementwise_math`): broadcasting, and which dtypes each takes."""

from __future__ import annotations

from collections.abc import Sequence

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, require_float, same_dtype
from asgrad.tensor.ir.dtypes import as_dtype, is_int
from asgrad.tensor.ir.registry import Attrs, TensorType


def _infer_unary_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(types[0])
    return types[0]


def _infer_unary_numeric(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if types[0].dtype == "bool":
        raise DTypeError(f"input is bool ({types[0]}); cast it to a number first")
    return types[0]


def _infer_binary(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    dtype = same_dtype(types)
    if dtype == "bool":
        raise DTypeError("arithmetic on bool values; cast them to a number first")
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), dtype)


def _infer_binary_float(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    out = _infer_binary(types, attrs)
    require_float(out, "operands")
    return out


def _infer_binary_any(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Two operands of one dtype, bools included (maximum, minimum)."""
    return TensorType(broadcast_shapes(*(t.shape for t in types)), same_dtype(types))


def _bitwise_type(types: Sequence[TensorType], ints: bool) -> TensorType:
    """Integers or bools (``&``, ``|``, ``^``, ``~``); ``ints``: integers only."""
    out = _infer_binary_any(types, {}) if len(types) == 2 else types[0]
    if not (is_int(out.dtype) or (out.dtype == "bool" and not ints)):
        want = "integer" if ints else "integer or bool"
        raise DTypeError(f"operands must be {want}, got {out}; cast them first")
    return out


def _infer_bitwise(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _bitwise_type(types, ints=False)


def _infer_int_binary(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return _bitwise_type(types, ints=True)


def _infer_logical(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """Any dtypes (nonzero is true), a bool result."""
    return TensorType(broadcast_shapes(*(t.shape for t in types)), "bool")


def _infer_isclose(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(_infer_binary_float(types, attrs).shape, "bool")


def _infer_predicate(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[0].shape, "bool")


def _infer_compare(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    same_dtype(types)
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), "bool")


def _infer_where(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    cond, a, b = types
    if cond.dtype != "bool":
        raise DTypeError(f"condition must be bool, got {cond}; compare values to get one")
    dtype = same_dtype([a, b], "the two branches")
    return TensorType(broadcast_shapes(cond.shape, a.shape, b.shape), dtype)


def _infer_cast(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[0].shape, as_dtype(attrs["dtype"]))


def _infer_clamp(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, hi = attrs["min"], attrs["max"]
    if lo is None and hi is None:
        raise ShapeError("give min, max or both")
    if lo is not None and hi is not None and lo > hi:
        raise ShapeError(f"min {lo} is greater than max {hi}")
    return _infer_unary_numeric(types, attrs)


def _infer_gelu_backward(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, x = types
    require_float(x)
    same_dtype(types, "gradient and input")
    if g.shape != x.shape:
        raise ShapeError(f"gradient is {g}; it must have the shape of input {x}")
    return x
