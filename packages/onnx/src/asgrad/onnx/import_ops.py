"""How each ONNX op becomes asgrad ops: elementwise, shape, index and constants.

An importer takes the context, the ONNX node and its input values and returns the
node's output values. On values known at load time (`Static`) the shape ops
compute with numpy, so shape arithmetic folds away; on tensors they append asgrad
ops through [`asgrad.tensor.Graph.apply`][asgrad.tensor.Graph.apply]. The conv, pool, norm,
reduction and matrix ops are in `asgrad.onnx.import_nn`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_composite import COMPOSITE_IMPORTERS
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.onnx.import_control import CONTROL_IMPORTERS
from asgrad.onnx.import_index import INDEX_IMPORTERS
from asgrad.onnx.import_math import MATH_IMPORTERS
from asgrad.onnx.import_ml import ML_IMPORTERS
from asgrad.onnx.import_nn import NN_IMPORTERS
from asgrad.onnx.import_norms import NORM_IMPORTERS
from asgrad.onnx.import_recurrent import RECURRENT_IMPORTERS
from asgrad.onnx.import_resize import RESIZE_IMPORTERS
from asgrad.onnx.import_static import STATIC_IMPORTERS
from asgrad.tensor import Tensor
from asgrad.tensor.ir.free_sizes import free_axes_of, free_reshape_target

__all__ = ["IMPORTERS", "ImportContext", "Static", "Value"]

_BIG = 2**62  # an ONNX Slice bound past any axis: Python's None


def _unary(op: str, **fixed: object) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        return [ctx.graph.apply(op, [ctx.tensor(xs[0])], dict(fixed))]

    return imp


def _binary(op: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Importer:
    """``op`` on tensors; ``fn`` (numpy) on values known at load time (shape arithmetic)."""

    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a, b = xs
        if isinstance(a, Static) and isinstance(b, Static):
            mask = np.logical_or(a.mask(), b.mask())
            return [Static(np.asarray(fn(a.value, b.value)).astype(a.value.dtype), mask)]
        return [ctx.graph.apply(op, [ctx.tensor(a), ctx.tensor(b)], {})]

    return imp


def _compare(op: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a, b = xs
        if isinstance(a, Static) and isinstance(b, Static):
            return [Static(np.asarray(fn(a.value, b.value)))]
        return [ctx.graph.apply(op, [ctx.tensor(a), ctx.tensor(b)], {})]

    return imp


def _variadic(op: str) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        out = ctx.tensor(xs[0])
        for x in xs[1:]:
            out = ctx.graph.apply(op, [out, ctx.tensor(x)], {})
        return [out]

    return imp


def _pow(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    base = ctx.tensor(xs[0])
    exponent = ctx.tensor(xs[1])
    if exponent.dtype != base.dtype:  # ONNX allows a float base with an int exponent
        exponent = ctx.graph.apply("cast", [exponent], {"dtype": base.dtype})
    return [ctx.graph.apply("pow", [base, exponent], {})]


def _identity(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    return [xs[0]]


def _dropout(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """The inference form (an identity, the mask all true); training mode with a
    ratio above 0 draws ONNX Runtime's random mask, which asgrad cannot reproduce."""
    a = attributes(node)
    ratio = float(a.get("ratio", 0.5))
    if len(xs) > 1 and node.input[1]:
        ratio = float(ctx.static(xs[1], "Dropout's ratio"))
    training = bool(a.get("training_mode", 0)) if ctx.opset < 12 else False
    if len(xs) > 2 and node.input[2]:
        training = bool(ctx.static(xs[2], "Dropout's training_mode"))
    if training and ratio > 0.0:
        raise OnnxImportError(
            f"Dropout in training mode (ratio {ratio}) draws a random mask that asgrad"
            " cannot reproduce; export the model in eval mode (training_mode false)"
        )
    x = ctx.tensor(xs[0])
    outs: list[Value] = [x]
    if len(node.output) > 1 and node.output[1]:
        outs.append(Static(np.ones(x.shape, dtype=bool)))
    return outs


def _cast(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    to = attributes(node)["to"]
    if to not in ONNX_TO_DTYPE:
        raise OnnxImportError(f"Cast to ONNX type {to} has no asgrad dtype")
    dtype = ONNX_TO_DTYPE[to]
    x = xs[0]
    if isinstance(x, Static):
        return [Static(x.value.astype(dtype), x.dynamic, x.origins)]
    return [ctx.graph.apply("cast", [x], {"dtype": dtype})]


def _where(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    if ctx.statics(xs):
        c, a, b = (np.asarray(v.value) for v in xs if isinstance(v, Static))
        return [Static(np.where(c, a, b))]
    return [ctx.graph.apply("where", [ctx.tensor(x) for x in xs], {})]


def _clip(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    lo, hi = a.get("min"), a.get("max")  # before opset 11
    if len(xs) > 1 and node.input[1]:
        lo = float(ctx.static(xs[1], "Clip's min"))
    if len(xs) > 2 and node.input[2]:
        hi = float(ctx.static(xs[2], "Clip's max"))
    x = ctx.tensor(xs[0])
    if lo is None and hi is None:
        return [x]
    if lo is not None and hi is not None and lo > hi:  # ONNX: every value becomes max
        return [x.maximum(lo).minimum(hi)]
    return [ctx.graph.apply("clamp", [x], {"min": lo, "max": hi})]


def _alpha(op: str, default: float) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        alpha = float(attributes(node).get("alpha", default))
        return [ctx.graph.apply(op, [ctx.tensor(xs[0])], {"alpha": alpha})]

    return imp


def _gelu(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    approximate = attributes(node).get("approximate", "none")
    return [ctx.graph.apply("gelu", [ctx.tensor(xs[0])], {"approximate": approximate})]


# -- constants and shapes ----------------------------------------------------------------------
def _constant(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    if "value" in a:
        return [Static(numpy_helper.to_array(a["value"]))]
    for key, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if key in a:
            return [Static(np.asarray(a[key], dtype=dtype))]
    raise OnnxImportError(f"Constant with attributes {sorted(a)} is not supported")


def _shape(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = xs[0]
    shape = np.asarray(x.value.shape if isinstance(x, Static) else x.shape, dtype=np.int64)
    dynamic = np.zeros(shape.shape, dtype=bool)
    if isinstance(x, Tensor) and shape.size:
        dynamic[0] = True  # the leading axis is the batch: keep it dynamic in a Reshape
    origins = np.full(shape.shape, None, dtype=object)
    if isinstance(x, Tensor):
        for axis in range(len(shape)):
            origins[axis] = (x, axis)
    a = attributes(node)
    start, end = a.get("start", 0), a.get("end", len(shape))
    return [Static(shape[start:end], dynamic[start:end], origins[start:end])]


def _size(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = xs[0]
    return [
        Static(
            np.asarray(np.prod(x.value.shape if isinstance(x, Static) else x.shape), dtype=np.int64)
        )
    ]


def _constant_of_shape(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    shape = [int(d) for d in ctx.static(xs[0], "ConstantOfShape's shape")]
    fill = attributes(node).get("value")
    value = numpy_helper.to_array(fill) if fill is not None else np.zeros(1, np.float32)
    folded = np.full(shape, value.reshape(-1)[0], dtype=value.dtype)
    sized = _free_sizes(ctx, xs[0], len(shape))
    if not sized:
        return [Static(folded)]
    # entries that are sizes of free axes (PyTorch's LSTM state: zeros of the batch size)
    # follow them when the graph runs: the fill broadcast like a tensor of the shape, its
    # other entries the constant sizes; folded where a constant is needed
    like = ctx.graph.constant(
        np.zeros([1 if k in sized else d for k, d in enumerate(shape)], np.float32)
    )
    for k, (t, axis) in sized.items():
        index = tuple(slice(None) if i == axis else slice(0, 1) for i in range(len(t.shape)))
        column = ctx.graph.apply("slice", [t], {"index": index})
        target = tuple(-1 if i == k else 1 for i in range(len(shape)))
        column = ctx.graph.apply("reshape", [column], {"shape": target})
        like = like + ctx.graph.apply("cast", [column], {"dtype": like.dtype})
    filled = ctx.graph.constant(folded.reshape(-1)[:1].reshape(()), dtype=value.dtype.name)
    return [Static(folded, follows=ctx.graph.apply("broadcast_like", [filled, like], {}))]


def _free_sizes(ctx: ImportContext, shape: Value, rank: int) -> dict[int, tuple[Tensor, int]]:
    """The entries of a shape that are sizes of free axes of tensors of this graph."""
    if not isinstance(shape, Static) or shape.value.shape != (rank,):
        return {}
    out: dict[int, tuple[Tensor, int]] = {}
    for k, origin in enumerate(shape.sources()):
        if origin is None or origin[0].graph is not ctx.graph:
            continue
        tensor, axis = origin
        if axis in (free_axes_of(tensor.node) or ()):
            out[k] = (tensor, axis)
    return out


def _range(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    start, limit, delta = (ctx.static(x, "Range's bounds") for x in xs)
    values = np.arange(start.item(), limit.item(), delta.item())
    return [Static(values.astype(start.dtype))]


def _reshape(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x, shape_value = xs
    target = [int(d) for d in ctx.static(shape_value, "Reshape's shape")]
    dynamic = shape_value.mask() if isinstance(shape_value, Static) else np.zeros(len(target), bool)
    dynamic = dynamic.reshape(-1).copy()
    source = x.value.shape if isinstance(x, Static) else x.shape
    if not attributes(node).get("allowzero", 0):
        if target and target[0] == 0 and isinstance(x, Tensor):
            dynamic[0] = True  # a 0 copies the leading (batch) axis: keep it dynamic
        target = [source[i] if d == 0 else d for i, d in enumerate(target)]
    if int(np.sum(dynamic)) == 1:  # the batch entry becomes the -1 (solved for at run time)
        if -1 in target:
            known = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = int(np.prod(source)) // max(known, 1)
        target[int(np.argmax(dynamic))] = -1
    if isinstance(x, Static):
        return [Static(x.value.reshape(target))]
    shape = free_reshape_target(x.node, tuple(target))  # a batch axis not in front stays free
    return [ctx.graph.apply("reshape", [x], {"shape": shape})]


def _axes(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value], rank: int) -> list[int] | None:
    """The ``axes`` of a node: its second input (opset 13+) or attribute; None if absent."""
    if len(xs) > 1 and node.input[1]:
        raw = ctx.static(xs[1], f"{node.op_type}'s axes").reshape(-1)
    elif "axes" in attributes(node):
        raw = np.asarray(attributes(node)["axes"])
    else:
        return None
    return sorted(int(a) % rank for a in raw) if rank else []


def _unsqueeze(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = xs[0]
    rank = x.value.ndim if isinstance(x, Static) else len(x.shape)
    if len(xs) > 1:
        added = ctx.static(xs[1], "Unsqueeze's axes").size
    else:
        added = len(attributes(node)["axes"])
    axes = _axes(ctx, node, xs, rank + added) or []
    if isinstance(x, Static):
        return [
            Static(
                np.expand_dims(x.value, tuple(axes)),
                np.expand_dims(x.mask(), tuple(axes)),
                np.expand_dims(x.sources(), tuple(axes)),
            )
        ]
    return [ctx.graph.apply("expand_dims", [x], {"axis": tuple(axes)})]


def _squeeze(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = xs[0]
    shape = x.value.shape if isinstance(x, Static) else x.shape
    axes = _axes(ctx, node, xs, len(shape))
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    if isinstance(x, Static):
        return [
            Static(
                np.squeeze(x.value, tuple(axes)),
                np.squeeze(x.mask(), tuple(axes)),
                np.squeeze(x.sources(), tuple(axes)),
            )
        ]
    return [ctx.graph.apply("squeeze", [x], {"axis": tuple(axes)})]


def _concat(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    axis = int(attributes(node)["axis"])
    if ctx.statics(xs):
        statics = [x for x in xs if isinstance(x, Static)]
        return [
            Static(
                np.concatenate([s.value for s in statics], axis=axis),
                np.concatenate([s.mask() for s in statics], axis=axis),
                np.concatenate([s.sources() for s in statics], axis=axis),
            )
        ]
    return [ctx.graph.apply("concat", [ctx.tensor(x) for x in xs], {"axis": axis})]


def _transpose(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    perm = attributes(node).get("perm", list(reversed(range(len(x.shape)))))
    return [ctx.graph.apply("transpose", [x], {"axes": tuple(int(p) for p in perm)})]


def _expand(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    shape = tuple(int(d) for d in ctx.static(xs[1], "Expand's shape"))
    target = tuple(np.broadcast_shapes(x.shape, shape))
    return [ctx.graph.apply("broadcast_to", [x], {"shape": target})]


def _gather(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    data, indices = xs
    axis = int(attributes(node).get("axis", 0))
    if isinstance(data, Static) and isinstance(indices, Static):
        idx = indices.value
        return [
            Static(
                np.take(data.value, idx, axis=axis),
                np.take(data.mask(), idx, axis=axis),
                _object_array(np.take(data.sources(), idx, axis=axis)),
            )
        ]
    x = ctx.tensor(data)
    axis %= len(x.shape)
    return [ctx.graph.apply("gather", [x, _wrapped(ctx, indices, x.shape[axis])], {"axis": axis})]


def _object_array(taken: object) -> np.ndarray:
    """What ``numpy.take`` of an object array gave (one entry, unwrapped, for a scalar
    index) as an object array."""
    if isinstance(taken, np.ndarray):
        return taken
    out = np.empty((), dtype=object)
    out[()] = taken
    return out


def _wrapped(ctx: ImportContext, indices: Value, size: int) -> Tensor:
    """``indices`` with ONNX's negative entries (counted from the end) made positive."""
    if isinstance(indices, Static):
        return ctx.tensor(Static(np.where(indices.value < 0, indices.value + size, indices.value)))
    zero = ctx.graph.constant(0, dtype=indices.dtype)
    shifted = indices + ctx.graph.constant(size, dtype=indices.dtype)
    return ctx.graph.apply("where", [indices < zero, shifted, indices], {})


def _bound(value: int) -> int | None:
    return None if abs(value) >= _BIG else value


def _slice(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = xs[0]
    shape = x.value.shape if isinstance(x, Static) else x.shape
    a = attributes(node)
    if len(xs) > 1:
        starts = ctx.static(xs[1], "Slice's starts").reshape(-1)
        ends = ctx.static(xs[2], "Slice's ends").reshape(-1)
        axes = ctx.static(xs[3], "Slice's axes") if len(xs) > 3 and node.input[3] else None
        steps = ctx.static(xs[4], "Slice's steps") if len(xs) > 4 and node.input[4] else None
    else:  # before opset 10: attributes
        starts, ends = np.asarray(a["starts"]), np.asarray(a["ends"])
        axes, steps = a.get("axes"), None
    axes_list = list(range(len(starts))) if axes is None else [int(v) % len(shape) for v in axes]
    steps_list = [1] * len(starts) if steps is None else [int(v) for v in steps]
    index: list[slice] = [slice(None)] * len(shape)
    for axis, start, end, step in zip(axes_list, starts, ends, steps_list, strict=True):
        index[axis] = slice(_bound(int(start)), _bound(int(end)), step)
    while index and index[-1] == slice(None):
        index.pop()
    if isinstance(x, Static):
        return [Static(x.value[tuple(index)], x.mask()[tuple(index)], x.sources()[tuple(index)])]
    return [ctx.graph.apply("slice", [x], {"index": tuple(index)})]


_UNARY = {
    "Abs": "abs",
    "Neg": "neg",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Sin": "sin",
    "Cos": "cos",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Relu": "relu",
    "Sign": "sign",
    "Erf": "erf",
}

IMPORTERS: dict[str, Importer] = {
    **{op_type: _unary(op) for op_type, op in _UNARY.items()},
    "Softplus": _unary("softplus", beta=1.0),
    "Add": _binary("add", np.add),
    "Sub": _binary("sub", np.subtract),
    "Mul": _binary("mul", np.multiply),
    "Pow": _pow,
    "Equal": _compare("equal", np.equal),
    "Greater": _compare("greater", np.greater),
    "GreaterOrEqual": _compare("greater_equal", np.greater_equal),
    "Less": _compare("less", np.less),
    "LessOrEqual": _compare("less_equal", np.less_equal),
    "Max": _variadic("maximum"),
    "Min": _variadic("minimum"),
    "Sum": _variadic("add"),
    "Where": _where,
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "Clip": _clip,
    "Elu": _alpha("elu", 1.0),
    "LeakyRelu": _alpha("leaky_relu", 0.01),
    "Gelu": _gelu,
    "Constant": _constant,
    "Shape": _shape,
    "Size": _size,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Reshape": _reshape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Transpose": _transpose,
    "Expand": _expand,
    "Gather": _gather,
    "Slice": _slice,
    **NN_IMPORTERS,
    **COMPOSITE_IMPORTERS,
    **MATH_IMPORTERS,
    **INDEX_IMPORTERS,
    **NORM_IMPORTERS,
    **RESIZE_IMPORTERS,
    **RECURRENT_IMPORTERS,
    **CONTROL_IMPORTERS,
    **STATIC_IMPORTERS,
    **ML_IMPORTERS,
}
"""The ONNX op types `asgrad.onnx.load` can build, by name (default domain).

>>> from asgrad.onnx import IMPORTERS
>>> "MatMul" in IMPORTERS
True
"""
