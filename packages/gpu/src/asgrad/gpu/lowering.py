"""The GPU twin of every registered op: a lowering from the op to WGSL kernel launches.

``LOWERINGS[name](ins, attrs, out)`` records the kernels computing one node from its
input arrays and returns the output array (``out`` gives the node's static shape and
dtype). Elementwise ops share one generated kernel family through WGSL expressions
(:data:`UNARY`, :data:`BINARY`), so they can later be fused by nesting expressions;
view ops (reshape, squeeze...) return an alias of their input's buffer and launch
nothing. The neural-network ops (convolution, pooling, norms, dropout) are lowered in
:mod:`asgrad.gpu.lowering_nn`, which adds them to :data:`LOWERINGS`. An op registered
without an entry fails the coverage test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.ops.elementwise import Operand, elementwise
from asgrad.gpu.ops.index import gather, one_hot, scatter_add
from asgrad.gpu.ops.matmul import matmul
from asgrad.gpu.ops.reduce import normalize_axes, reduce_axis
from asgrad.gpu.ops.rows import softmax
from asgrad.gpu.source import wgsl_type
from asgrad.tensor.registry import TensorType

__all__ = [
    "EXPRESSION_OPS",
    "LOWERINGS",
    "Lowering",
    "alias",
    "expression",
    "gpu_kernel_names",
    "lower",
    "numpy_dtype",
]

Attrs = Mapping[str, Any]
Lowering = Callable[[list[GpuArray], Attrs, TensorType], GpuArray]

_F32_MAX = 3.4028234663852886e38


def numpy_dtype(dtype: str) -> np.dtype[Any]:
    """The numpy dtype of a graph dtype (float64 values are computed in float32)."""
    return np.dtype(dtype)


def literal(value: float, wgsl: str = "f32") -> str:
    """A WGSL literal of ``value`` for an element of type ``wgsl``."""
    if wgsl == "i32":
        return f"{int(value)}i"
    if wgsl == "u32":
        return f"{int(value)}u"
    v = float(value)
    if not math.isfinite(v):
        v = math.copysign(_F32_MAX, v)
    text = repr(v)
    return text if ("." in text or "e" in text) else text + ".0"


def _zero(wgsl: str) -> str:
    return {"f32": "0.0", "i32": "0i", "u32": "0u"}[wgsl]


def alias(x: GpuArray, shape: tuple[int, ...]) -> GpuArray:
    """A new shape over ``x``'s buffer (no copy; the buffer stays owned by ``x``)."""
    return x.view(shape)


# -- elementwise ------------------------------------------------------------------------
# Each builds the WGSL expression over x0, x1, ... from the attrs and the element type.
ExprFn = Callable[[Attrs, str], str]


def _fixed(expr: str) -> ExprFn:
    return lambda attrs, t: expr


def _clamp_expr(attrs: Attrs, t: str) -> str:
    expr = "x0"
    if attrs.get("min") is not None:
        expr = f"max({expr}, {literal(attrs['min'], t)})"
    if attrs.get("max") is not None:
        expr = f"min({expr}, {literal(attrs['max'], t)})"
    return expr


def _softplus_expr(attrs: Attrs, t: str) -> str:
    beta = float(attrs.get("beta", 1.0))
    return f"asg_softplus(x0 * {literal(beta)}) * {literal(1.0 / beta)}"


def _gelu_expr(attrs: Attrs, t: str) -> str:
    tanh = attrs.get("approximate", "none") == "tanh"
    return "asg_gelu_tanh(x0)" if tanh else "asg_gelu_erf(x0)"


UNARY: dict[str, ExprFn] = {
    "neg": _fixed("-x0"),
    "exp": _fixed("asg_exp(x0)"),
    "log": _fixed("asg_log(x0)"),
    "sqrt": _fixed("sqrt(x0)"),
    "abs": _fixed("abs(x0)"),
    "sign": _fixed("sign(x0)"),
    "sin": _fixed("sin(x0)"),
    "cos": _fixed("cos(x0)"),
    "tanh": _fixed("asg_tanh(x0)"),
    "sigmoid": _fixed("asg_sigmoid(x0)"),
    "relu": lambda attrs, t: f"max(x0, {_zero(t)})",
    "leaky_relu": lambda attrs, t: (
        f"select(x0 * {literal(attrs.get('alpha', 0.01))}, x0, x0 > 0.0)"
    ),
    "gelu": _gelu_expr,
    "erf": _fixed("asg_erf(x0)"),
    "silu": _fixed("x0 * asg_sigmoid(x0)"),
    "elu": lambda attrs, t: (
        f"select({literal(attrs.get('alpha', 1.0))} * asg_expm1(min(x0, 0.0)), x0, x0 > 0.0)"
    ),
    "softplus": _softplus_expr,
    "clamp": _clamp_expr,
}

BINARY: dict[str, str] = {
    "add": "x0 + x1",
    "sub": "x0 - x1",
    "mul": "x0 * x1",
    "div": "x0 / x1",
    "pow": "asg_pow(x0, x1)",
    "maximum": "max(x0, x1)",
    "minimum": "min(x0, x1)",
}

COMPARE: dict[str, str] = {
    "equal": "==",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}


def expression(op: str, attrs: Attrs, in_types: Sequence[str], out_dtype: str) -> str | None:
    """The WGSL expression of an elementwise op over ``x0, x1, ...``, or None.

    ``in_types`` are the inputs' WGSL storage types; the expression yields the storage
    type of ``out_dtype``. Elementwise chains fuse by substituting one op's expression
    for an input of the next (see :mod:`asgrad.gpu.fusion`).
    """
    if op in UNARY:
        return UNARY[op](attrs, in_types[0])
    if op in BINARY:
        return BINARY[op]
    if op in COMPARE:
        return f"select(0u, 1u, x0 {COMPARE[op]} x1)"
    if op == "where":
        return f"select(x2, x1, x0 != {_zero(in_types[0])})"
    if op == "cast":
        dtype = numpy_dtype(out_dtype)
        t_in, t_out = in_types[0], wgsl_type(dtype)
        if dtype == np.bool_:
            return f"select(0u, 1u, x0 != {_zero(t_in)})"
        return "x0" if t_in == t_out else f"{t_out}(x0)"
    return None


EXPRESSION_OPS = frozenset({*UNARY, *BINARY, *COMPARE, "where", "cast"})


def _lower_expression(op: str) -> Lowering:
    def lower_elementwise(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        expr = expression(op, attrs, [x.wgsl for x in ins], out.dtype)
        assert expr is not None
        return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)

    return lower_elementwise


# -- reductions ---------------------------------------------------------------------------
def _reduction(kind: str) -> Lowering:
    def lower_reduction(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        (x,) = ins
        return reduce_axis(
            kind,
            x,
            attrs.get("axis"),
            bool(attrs.get("keepdims", False)),
            out_dtype=numpy_dtype(out.dtype),
        )

    return lower_reduction


def _var(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    (x,) = ins
    axes = normalize_axes(attrs.get("axis"), x.ndim)
    mean = reduce_axis("mean", x, axes, keepdims=True)
    sq = elementwise("(x0 - x1) * (x0 - x1)", [x, mean], np.float32, x.shape)
    return reduce_axis("mean", sq, axes, bool(attrs.get("keepdims", False)))


def _argmax(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    (x,) = ins
    result = reduce_axis("argmax", x, int(attrs["axis"]), out_dtype=np.int64)
    return alias(result, out.shape)


def _softmax(log: bool) -> Lowering:
    def lower_softmax(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        return softmax(ins[0], int(attrs.get("axis", -1)), log=log)

    return lower_softmax


def _size_ratio(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    a, b = ins
    value = a.size / max(b.size, 1)
    dtype = numpy_dtype(out.dtype)
    return elementwise(literal(value, wgsl_type(dtype)), [], dtype, (), None)


# -- shape and index ops --------------------------------------------------------------------
def _view(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return alias(ins[0], out.shape)


def _copy(x: Operand, out: TensorType) -> GpuArray:
    return elementwise("x0", [x], numpy_dtype(out.dtype), out.shape)


def _transpose(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return _copy(Operand.of(ins[0]).permute(tuple(attrs["axes"])), out)


def _broadcast(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return _copy(Operand.of(ins[0]), out)


def _sum_to_like(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g = ins[0]
    lead = g.ndim - len(out.shape)
    axes = list(range(lead)) + [
        lead + i for i, size in enumerate(out.shape) if size == 1 and g.shape[lead + i] != 1
    ]
    if not axes:
        return alias(g, out.shape)
    summed = reduce_axis("sum", g, axes, keepdims=False, out_dtype=numpy_dtype(out.dtype))
    return alias(summed, out.shape)


def slice_view(x: Operand, index: Sequence[Any]) -> Operand:
    """The strided view ``x[index]`` for basic indexing with ints and slices."""
    shape: list[int] = []
    strides: list[int] = []
    offset = x.offset
    for d, size in enumerate(x.shape):
        item = index[d] if d < len(index) else slice(None)
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            shape.append(len(range(start, stop, step)))
            strides.append(x.strides[d] * step)
            offset += start * x.strides[d]
        else:
            offset += (int(item) % size) * x.strides[d]
    return Operand(x.array, tuple(shape), tuple(strides), offset)


def _slice(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return _copy(slice_view(Operand.of(ins[0]), attrs["index"]), out)


def _zeros(out: TensorType) -> GpuArray:
    dtype = numpy_dtype(out.dtype)
    return elementwise(_zero(wgsl_type(dtype)), [], dtype, out.shape)


def _scatter_slice(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    result = _zeros(out)
    view = slice_view(Operand.of(result), attrs["index"])
    elementwise("x0", [ins[0]], out=view)
    return result


def _concat(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    axis = int(attrs["axis"]) % len(out.shape)
    result = GpuArray.empty(out.shape, numpy_dtype(out.dtype), ins[0].device)
    start = 0
    for x in ins:
        index = [slice(None)] * axis + [slice(start, start + x.shape[axis])]
        elementwise("x0", [x], out=slice_view(Operand.of(result), index))
        start += x.shape[axis]
    return result


def _gather(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return gather(ins[0], ins[1], int(attrs["axis"]))


def _scatter_add(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, indices, _ = ins
    return scatter_add(g, indices, out.shape, int(attrs["axis"]))


def _one_hot(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return one_hot(ins[0], int(attrs["depth"]), numpy_dtype(out.dtype))


def _matmul(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return matmul(ins[0], ins[1])


LOWERINGS: dict[str, Lowering] = {
    **{name: _lower_expression(name) for name in sorted(EXPRESSION_OPS)},
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "max": _reduction("max"),
    "min": _reduction("min"),
    "var": _var,
    "argmax": _argmax,
    "softmax": _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "size_ratio": _size_ratio,
    "reshape": _view,
    "reshape_like": _view,
    "expand_dims": _view,
    "squeeze": _view,
    "transpose": _transpose,
    "broadcast_to": _broadcast,
    "broadcast_like": _broadcast,
    "sum_to_like": _sum_to_like,
    "slice": _slice,
    "scatter_slice": _scatter_slice,
    "concat": _concat,
    "gather": _gather,
    "scatter_add": _scatter_add,
    "one_hot": _one_hot,
    "matmul": _matmul,
}

# Leaves are bound by the executor (fed, uploaded once, or held in the variable store).
LEAVES = frozenset({"input", "constant", "parameter"})


def gpu_kernel_names() -> frozenset[str]:
    """Names of the ops the GPU backend can run."""
    return frozenset(LOWERINGS) | LEAVES


def lower(op: str, ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    """Record the kernels of one node; raises naming the op when it has no GPU twin."""
    try:
        fn = LOWERINGS[op]
    except KeyError:
        raise GpuUnsupportedError(
            f"op {op!r} has no GPU kernel yet; run this graph with backend='cpu' "
            "(and report it: every registered op should have a WGSL twin)"
        ) from None
    return fn(ins, attrs, out)
