"""How each elementwise, reduction, shape, index and linalg op is written in ONNX.

An exporter takes the builder, the asgrad node and the ONNX names of the node's
inputs, appends ONNX nodes and returns the name of the value equal to the node's.
Composites without one ONNX op (GELU, softplus with its threshold, variance) are
decomposed here into ops ONNX Runtime has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.onnx.builder import DTYPE_TO_ONNX, OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.tensor import Node

__all__ = ["BASIC_EXPORTERS", "Exporter", "axes_of"]

Exporter = Callable[[OnnxBuilder, Node, list[str]], str]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def axes_of(axis: Any, ndim: int) -> list[int]:
    """An asgrad ``axis`` attribute (None, an int or a sequence) as sorted axes >= 0."""
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int | np.integer) else list(axis)
    return sorted({int(a) % ndim for a in items}) if ndim else []


def _simple(op_type: str) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        if node.dtype == "bool" and op_type in ("Max", "Min"):  # ONNX's take no bools
            wide = [b.op("Cast", [x], to=DTYPE_TO_ONNX["int32"]) for x in xs]
            return b.op("Cast", [b.op(op_type, wide)], to=DTYPE_TO_ONNX["bool"])
        return b.op(op_type, xs)

    return export


def _not_equal(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Not", [b.op("Equal", xs)])


def _cast(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Cast", xs, to=DTYPE_TO_ONNX[node.dtype])


def _clamp(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    lo, hi = node.attrs["min"], node.attrs["max"]
    bounds = [
        b.scalar(lo, node) if lo is not None else "",
        b.scalar(hi, node) if hi is not None else "",
    ]
    while bounds and not bounds[-1]:
        bounds.pop()
    return b.op("Clip", [xs[0], *bounds])


def _elu(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Elu", xs, alpha=float(node.attrs["alpha"]))


def _leaky_relu(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("LeakyRelu", xs, alpha=float(node.attrs["alpha"]))


def _silu(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Mul", [xs[0], b.op("Sigmoid", xs)])


def _softplus(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``x`` where ``beta x > 20`` (PyTorch's threshold), else ``Softplus(beta x) / beta``."""
    beta = float(node.attrs["beta"])
    bx = b.op("Mul", [xs[0], b.scalar(beta, node)]) if beta != 1.0 else xs[0]
    soft = b.op("Softplus", [bx])
    if beta != 1.0:
        soft = b.op("Div", [soft, b.scalar(beta, node)])
    above = b.op("Greater", [bx, b.scalar(20.0, node)])
    return b.op("Where", [above, xs[0], soft])


def _gelu(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``0.5 x (1 + erf(x / sqrt 2))``, or the tanh form with ``approximate="tanh"``."""
    x = xs[0]
    if node.attrs["approximate"] == "tanh":
        cube = b.op("Mul", [b.op("Mul", [x, x]), x])
        inner = b.op("Add", [x, b.op("Mul", [cube, b.scalar(0.044715, node)])])
        t = b.op("Tanh", [b.op("Mul", [inner, b.scalar(math.sqrt(2.0 / math.pi), node)])])
    else:
        t = b.op("Erf", [b.op("Mul", [x, b.scalar(1.0 / math.sqrt(2.0), node)])])
    half_x = b.op("Mul", [x, b.scalar(0.5, node)])
    return b.op("Mul", [half_x, b.op("Add", [t, b.scalar(1.0, node)])])


# -- reductions ------------------------------------------------------------------------------
def _reduction(op_type: str) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        (x,) = xs
        source = node.inputs[0]
        boolean = source.dtype == "bool" and op_type in ("ReduceMax", "ReduceMin")
        if boolean:  # ONNX's ReduceMax/ReduceMin take no bools: through int32
            x = b.op("Cast", [x], to=DTYPE_TO_ONNX["int32"])
        elif source.dtype != node.dtype:  # an integer sum accumulates in int64
            x = b.op("Cast", [x], to=DTYPE_TO_ONNX[node.dtype])
        axes = axes_of(node.attrs["axis"], len(source.shape))
        y = b.reduce(op_type, x, axes, node.attrs["keepdims"])
        return b.op("Cast", [y], to=DTYPE_TO_ONNX["bool"]) if boolean else y

    return export


def _var(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    if node.attrs["correction"] != 0.0:
        raise OnnxExportError(
            "var with a correction (an unbiased variance, or std) is not exported yet;"
            " export the population variance (correction=0)",
            op=node.op,
            location=node.location,
        )
    axes = axes_of(node.attrs["axis"], len(node.inputs[0].shape))
    mean = b.reduce("ReduceMean", xs[0], axes, True)
    d = b.op("Sub", [xs[0], mean])
    return b.reduce("ReduceMean", b.op("Mul", [d, d]), axes, node.attrs["keepdims"])


def _argmax(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    axis = int(node.attrs["axis"]) % len(node.inputs[0].shape)
    return b.op("ArgMax", xs, axis=axis, keepdims=int(node.attrs["keepdims"]))


def _size_ratio(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    to = DTYPE_TO_ONNX[node.dtype]
    top = b.op("Cast", [b.op("Size", [xs[0]])], to=to)
    bottom = b.op("Max", [b.op("Size", [xs[1]]), b.const(1, "int64", "one")])
    return b.op("Div", [top, b.op("Cast", [bottom], to=to)])


# -- shape -----------------------------------------------------------------------------------
def _reshape(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    shape = [int(d) for d in node.attrs["shape"]]
    allow_zero = 1 if 0 in shape else None  # asgrad's 0 is a size, not "copy the axis"
    return b.op("Reshape", [xs[0], b.ints(shape)], allowzero=allow_zero)


def _transpose(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    ndim = len(node.shape)
    return b.op("Transpose", xs, perm=[int(a) % ndim for a in node.attrs["axes"]])


def _broadcast_to(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Expand", [xs[0], b.ints(node.attrs["shape"])])


def _expand_dims(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    axes = axes_of(node.attrs["axis"], len(node.shape))
    return b.op("Unsqueeze", [xs[0], b.ints(axes, "axes")]) if axes else b.op("Identity", xs)


def _squeeze(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    source = node.inputs[0].shape
    axes = [a for a in axes_of(node.attrs["axis"], len(source)) if source[a] == 1]
    return b.op("Squeeze", [xs[0], b.ints(axes, "axes")]) if axes else b.op("Identity", xs)


def _concat(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Concat", xs, axis=int(node.attrs["axis"]) % len(node.shape))


def _broadcast_like(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Expand", [xs[0], b.op("Shape", [xs[1]])])


def _reshape_like(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Reshape", [xs[0], b.op("Shape", [xs[1]])])


def _sum_to_like(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    g, x = node.inputs[0].shape, node.inputs[1].shape
    lead = len(g) - len(x)
    axes = list(range(lead)) + [i + lead for i, d in enumerate(x) if d == 1 and g[i + lead] != 1]
    summed = b.reduce("ReduceSum", xs[0], axes, True)
    return b.op("Reshape", [summed, b.op("Shape", [xs[1]])])


# -- index -----------------------------------------------------------------------------------
def _slice(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """Slices keep Python's clamping (ONNX Slice has it); an int index is a width-1
    slice whose axis is squeezed afterwards."""
    starts: list[int] = []
    ends: list[int] = []
    steps: list[int] = []
    axes: list[int] = []
    dropped: list[int] = []
    for axis, item in enumerate(node.attrs["index"]):
        if isinstance(item, slice):
            step = 1 if item.step is None else int(item.step)
            if item.start is None and item.stop is None and step == 1:
                continue  # the whole axis: nothing to do (and a free axis stays free)
            default_start, default_end = (0, INT64_MAX) if step > 0 else (INT64_MAX, INT64_MIN)
            starts.append(default_start if item.start is None else int(item.start))
            ends.append(default_end if item.stop is None else int(item.stop))
            steps.append(step)
        else:
            i = int(item)
            starts.append(i)
            ends.append(INT64_MAX if i == -1 else i + 1)
            steps.append(1)
            dropped.append(axis)
        axes.append(axis)
    out = xs[0]
    if axes:
        out = b.op(
            "Slice",
            [
                out,
                b.ints(starts, "starts"),
                b.ints(ends, "ends"),
                b.ints(axes, "axes"),
                b.ints(steps, "steps"),
            ],
        )
    if dropped:
        out = b.op("Squeeze", [out, b.ints(dropped, "axes")])
    return out if out != xs[0] else b.op("Identity", xs)


def _gather(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("Gather", xs, axis=int(node.attrs["axis"]) % len(node.inputs[0].shape))


def _one_hot(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``indices[..., None] == arange(depth)``, cast: ONNX Runtime's OneHot kernels
    cover few dtype combinations, Equal covers all."""
    depth = int(node.attrs["depth"])
    classes = b.const(np.arange(depth), node.inputs[0].dtype, "classes")
    expanded = b.op("Unsqueeze", [xs[0], b.ints([-1], "axes")])
    return b.op("Cast", [b.op("Equal", [expanded, classes])], to=DTYPE_TO_ONNX[node.dtype])


def _where(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    cond = xs[0]
    if node.inputs[0].dtype != "bool":
        cond = b.op("Cast", [cond], to=DTYPE_TO_ONNX["bool"])
    return b.op("Where", [cond, *xs[1:]])


_SIMPLE: Sequence[tuple[str, str]] = (
    ("abs", "Abs"),
    ("add", "Add"),
    ("sub", "Sub"),
    ("mul", "Mul"),
    ("div", "Div"),
    ("neg", "Neg"),
    ("exp", "Exp"),
    ("log", "Log"),
    ("sqrt", "Sqrt"),
    ("sin", "Sin"),
    ("cos", "Cos"),
    ("tanh", "Tanh"),
    ("sigmoid", "Sigmoid"),
    ("relu", "Relu"),
    ("sign", "Sign"),
    ("erf", "Erf"),
    ("pow", "Pow"),
    ("maximum", "Max"),
    ("minimum", "Min"),
    ("equal", "Equal"),
    ("greater", "Greater"),
    ("greater_equal", "GreaterOrEqual"),
    ("less", "Less"),
    ("less_equal", "LessOrEqual"),
    ("stop_gradient", "Identity"),
    ("matmul", "MatMul"),
)

BASIC_EXPORTERS: dict[str, Exporter] = {
    **{name: _simple(op_type) for name, op_type in _SIMPLE},
    "not_equal": _not_equal,
    "where": _where,
    "cast": _cast,
    "clamp": _clamp,
    "elu": _elu,
    "leaky_relu": _leaky_relu,
    "silu": _silu,
    "softplus": _softplus,
    "gelu": _gelu,
    "sum": _reduction("ReduceSum"),
    "mean": _reduction("ReduceMean"),
    "max": _reduction("ReduceMax"),
    "min": _reduction("ReduceMin"),
    "var": _var,
    "argmax": _argmax,
    "size_ratio": _size_ratio,
    "reshape": _reshape,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "expand_dims": _expand_dims,
    "squeeze": _squeeze,
    "concat": _concat,
    "broadcast_like": _broadcast_like,
    "reshape_like": _reshape_like,
    "sum_to_like": _sum_to_like,
    "slice": _slice,
    "gather": _gather,
    "one_hot": _one_hot,
}
