"""The elementwise family on the GPU: one generated kernel for every elementwise op.

`elementwise` records ``out = expr(x0, x1, ...)`` with numpy broadcasting through
strides (``kernels/elementwise.wgsl``, with the math of ``kernels/prelude.wgsl``). Each
op is a WGSL expression over ``x0, x1, ...`` (`expression`), so chains of them
fuse by nesting expressions (`asgrad.gpu.plan.fusion`). Other families use
`elementwise` for copies, strided views and fills.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asgrad.gpu.device import fold_groups, get_device
from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides
from asgrad.gpu.device.checks import checks_source
from asgrad.gpu.device.source import kernel_text, numpy_dtype, render, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import _elementwise_math as math_ops
from asgrad.gpu.lowering.common import Attrs, Lowering, literal, zero
from asgrad.gpu.lowering.optim import OPTIM_EXPRESSIONS
from asgrad.tensor import TensorType
from asgrad.tensor.ops.elementwise import softplus_bounds

__all__ = [
    "EXPRESSION_OPS",
    "LOWERINGS",
    "MAX_INPUTS",
    "MAX_RANK",
    "WGSL_FILES",
    "elementwise",
    "expression",
    "gelu_backward_expr",
    "max_inputs",
    "strided_copy",
]

WGSL_FILES: tuple[str, ...] = ("elementwise.wgsl", "prelude.wgsl")

MAX_INPUTS = 7  # 8 storage buffers per stage (WebGPU default): 7 inputs + the output
MAX_RANK = 8
OUT_SLOT = 7  # params slot of the output's strides and offset


def _source(
    expr: str,
    in_types: tuple[str, ...],
    out_type: str,
    modes: tuple[str, ...],
    out_mode: str,
    rank: int,
    own: tuple[bool, ...],
    bound: list[int],
) -> str:
    """The WGSL of one elementwise kernel: bindings, index arithmetic, loads, ``expr``."""
    bindings = [
        f"@group(0) @binding({j + 1}) var<storage, read> in{k}: array<{in_types[k]}>;"
        for j, k in enumerate(bound)
    ]
    bindings.append(
        f"@group(0) @binding({len(bound) + 1}) var<storage, read_write> out: array<{out_type}>;"
    )
    if CHECKED in expr:
        bindings.append(checks_source(len(bound) + 2))
    strided = [k for k, m in enumerate(modes) if m == "strided"]
    if out_mode == "strided":
        strided.append(OUT_SLOT)
    index: list[str] = []
    if strided:
        index.append("    var rem = i;")
        index += [f"    var o{k} = mu({76 + k}u);" for k in strided]
        for d in range(rank - 1, -1, -1):
            if d == 0:
                index.append("    let c0 = rem;")
            else:
                index.append(f"    let c{d} = rem % mu({4 + d}u);")
                index.append(f"    rem = rem / mu({4 + d}u);")
            index += [f"    o{k} += c{d} * mu({12 + 8 * k + d}u);" for k in strided]
    loads = []
    for k, mode in enumerate(modes):
        where = {"contig": f"i + mu({76 + k}u)", "scalar": f"mu({76 + k}u)"}.get(mode, f"o{k}")
        source_array = "out" if own[k] else f"in{k}"
        loads.append(f"    let x{k} = {source_array}[{where}];")
    out_index = f"o{OUT_SLOT}" if out_mode == "strided" else f"i + mu({76 + OUT_SLOT}u)"
    return render(
        "elementwise",
        PRELUDE=kernel_text("prelude"),
        BINDINGS="\n".join(bindings),
        INDEX="\n".join(index),
        LOADS="\n".join(loads),
        EXPR=expr,
        OUT_INDEX=out_index,
    )


def max_inputs(expr: str) -> int:
    """Inputs a kernel of ``expr`` may bind: one fewer when it checks (the check slots)."""
    return MAX_INPUTS - (CHECKED in expr)


def _collapse(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dims that every operand walks contiguously; drop size-1 dims."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if out_shape and all(
            st[d] * shape[d] == os[-1] for st, os in zip(strides, out_strides, strict=True)
        ):
            out_shape[-1] *= shape[d]
            for st, os in zip(strides, out_strides, strict=True):
                os[-1] = st[d]
            continue
        out_shape.append(shape[d])
        for st, os in zip(strides, out_strides, strict=True):
            os.append(st[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def elementwise(
    expr: str,
    inputs: Sequence[GpuArray | Operand],
    out_dtype: Any = np.float32,
    out_shape: tuple[int, ...] | None = None,
    out: GpuArray | Operand | None = None,
) -> GpuArray:
    """Record ``out = expr(x0, x1, ...)`` elementwise with numpy broadcasting.

    ``expr`` is a WGSL expression over ``x0..x{n-1}`` (each of its input's storage
    type) that yields the output's storage type; functions of ``prelude.wgsl`` may be
    used. ``out`` may be an `Operand`: a strided view of a larger buffer (a
    slice, say), whose shape is the output shape. Returns the array written.
    """
    ops = [Operand.of(x) for x in inputs]
    if len(ops) > max_inputs(expr):
        raise GpuUnsupportedError(f"an elementwise kernel takes at most {max_inputs(expr)} inputs")
    out_view = out if isinstance(out, Operand) else None
    if out_view is not None:
        out_shape = out_view.shape
    if out_shape is None:
        out_shape = tuple(np.broadcast_shapes(*(o.shape for o in ops))) if ops else ()
    if out is None:
        out = GpuArray.empty(out_shape, out_dtype, ops[0].array.device if ops else None)
    target = out_view.array if out_view is not None else out
    assert isinstance(target, GpuArray)
    n = math.prod(out_shape)
    if n == 0:
        return target
    strides = [o.broadcast_strides(out_shape) for o in ops]
    if out_view is not None:
        strides.append(out_view.strides)
    shape, strides = _collapse(out_shape, strides)
    if len(shape) > MAX_RANK:
        raise GpuUnsupportedError(f"elementwise kernels support rank <= {MAX_RANK}")
    contiguous = contiguous_strides(shape)
    modes = tuple(
        "scalar" if all(s == 0 for s in st) else "contig" if st == contiguous else "strided"
        for st in strides
    )
    out_mode = "contig"
    offsets = [o.offset for o in ops]
    if out_view is not None:
        out_mode = "contig" if modes[-1] == "contig" else "strided"
        modes = modes[:-1]
        offsets += [0] * (OUT_SLOT - len(ops)) + [out_view.offset]
        strides = strides[:-1] + [()] * (OUT_SLOT - len(ops)) + [strides[-1]]
    rank = len(shape) if "strided" in (*modes, out_mode) else 0
    in_types = tuple(o.array.wgsl for o in ops)
    out_type = target.wgsl

    meta = [0] * 96
    meta[0], meta[1] = n, len(shape)
    meta[4 : 4 + len(shape)] = shape
    for k, st in enumerate(strides):
        meta[12 + 8 * k : 12 + 8 * k + len(st)] = [s & 0xFFFFFFFF for s in st]
    for k, off in enumerate(offsets):
        meta[76 + k] = off

    # an input that is the output's own buffer (an in-place update) is read through
    # the output binding: one buffer may not be bound as both read and read_write
    own = tuple(o.array.buffer is target.buffer for o in ops)
    for k, is_own in enumerate(own):
        same_walk = n == 1 or (modes[k] == "contig" and out_mode == "contig")
        if is_own and (
            not same_walk or offsets[k] != (out_view.offset if out_view is not None else 0)
        ):
            raise GpuUnsupportedError("an in-place input must be read exactly where it is written")
    bound = [k for k in range(len(ops)) if not own[k]]

    checked = CHECKED in expr
    binds = ("uniform",) + ("read",) * len(bound) + ("write",) + ("checks",) * checked
    device = target.device
    key = ("elementwise", expr, modes, out_mode, rank, in_types, out_type, own)
    pipe = device.pipeline(
        key, lambda: _source(expr, in_types, out_type, modes, out_mode, rank, own, bound), binds
    )
    params = device.params(struct.pack(f"<{len(meta)}I", *meta))
    buffers = (params, *(ops[k].array.buffer for k in bound), target.buffer)
    if checked:
        buffers = (*buffers, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-n // 256), device.max_groups))
    return target


def strided_copy(x: Operand, out: TensorType) -> GpuArray:
    """A contiguous copy of the view ``x``, of ``out``'s shape and dtype."""
    return elementwise("x0", [x], numpy_dtype(out.dtype), out.shape)


# Each builds the WGSL expression over x0, x1, ... from the attrs and the element type.
# Float expressions go through prelude.wgsl's functions wherever numpy defines a result
# at NaN or +-inf that WGSL leaves undefined (max/min/clamp/sign/comparisons).
ExprFn = Callable[[Attrs, str], str]


def _fixed(expr: str) -> ExprFn:
    return lambda attrs, t: expr


def _typed(f32: str, other: str) -> ExprFn:
    """``f32`` for float operands, ``other`` for integers (no NaN to carry)."""
    return lambda attrs, t: f32 if t == "f32" else other


def _clamp_expr(attrs: Attrs, t: str) -> str:
    lo, hi = attrs.get("min"), attrs.get("max")
    if t == "f32":
        low = literal(lo) if lo is not None else "asg_ninf()"
        high = literal(hi) if hi is not None else "asg_inf()"
        return f"asg_clamp(x0, {low}, {high})"
    expr = "x0"
    if lo is not None:
        expr = f"max({expr}, {literal(lo, t)})"
    if hi is not None:
        expr = f"min({expr}, {literal(hi, t)})"
    return expr


def _softplus_expr(attrs: Attrs, t: str) -> str:
    # As the CPU kernel: x where beta x > 20, and beta x never formed beyond [-1000, 20].
    beta = float(attrs.get("beta", 1.0))
    lo, hi = softplus_bounds(beta)
    above = f"x0 > {literal(hi)}" if beta > 0 else f"x0 < {literal(lo)}"
    soft = f"asg_softplus(clamp(x0, {literal(lo)}, {literal(hi)}) * {literal(beta)})"
    return f"asg_keepnan(x0, select({soft} * {literal(1.0 / beta)}, x0, {above}))"


def _gelu_expr(attrs: Attrs, t: str) -> str:
    tanh = attrs.get("approximate", "none") == "tanh"
    return "asg_gelu_tanh(x0)" if tanh else "asg_gelu_erf(x0)"


UNARY: dict[str, ExprFn] = {
    "neg": _fixed("-x0"),
    "stop_gradient": _fixed("x0"),
    "exp": _fixed("asg_exp(x0)"),
    "log": _fixed("asg_log(x0)"),
    "sqrt": _fixed("asg_sqrt(x0)"),
    "abs": _fixed("abs(x0)"),
    "sign": _typed("asg_sign(x0)", "sign(x0)"),
    "sin": _fixed("asg_sin(x0)"),
    "cos": _fixed("asg_cos(x0)"),
    "tanh": _fixed("asg_tanh(x0)"),
    "sigmoid": _fixed("asg_sigmoid(x0)"),
    "relu": lambda attrs, t: "asg_relu(x0)" if t == "f32" else f"max(x0, {zero(t)})",
    "leaky_relu": lambda attrs, t: f"asg_leaky_relu(x0, {literal(attrs.get('alpha', 0.01))})",
    "gelu": _gelu_expr,
    "erf": _fixed("asg_erf(x0)"),
    "silu": _fixed("x0 * asg_sigmoid(x0)"),
    "elu": lambda attrs, t: f"asg_elu(x0, {literal(attrs.get('alpha', 1.0))})",
    "softplus": _softplus_expr,
    "clamp": _clamp_expr,
    **math_ops.UNARY,
}

BINARY: dict[str, ExprFn] = {
    "add": _fixed("x0 + x1"),
    "sub": _fixed("x0 - x1"),
    "mul": _fixed("x0 * x1"),
    "div": _fixed("x0 / x1"),
    "pow": _fixed("asg_pow(x0, x1)"),
    "maximum": _typed("asg_max(x0, x1)", "max(x0, x1)"),
    "minimum": _typed("asg_min(x0, x1)", "min(x0, x1)"),
    **math_ops.BINARY,
}

COMPARE: dict[str, tuple[str, str]] = {
    "equal": ("==", "asg_eq"),
    "not_equal": ("!=", "asg_ne"),
    "less": ("<", "asg_lt"),
    "less_equal": ("<=", "asg_le"),
    "greater": (">", "asg_gt"),
    "greater_equal": (">=", "asg_ge"),
}

# int64 values live in int32 storage: these ops check that their result fits
# (kernels/checks.wgsl); int32 arithmetic wraps, as numpy's does.
CHECKED_INT64: dict[str, str] = {
    "add": "asg_chk_add(x0, x1, {slot}u)",
    "sub": "asg_chk_sub(x0, x1, {slot}u)",
    "mul": "asg_chk_mul(x0, x1, {slot}u)",
    "neg": "asg_chk_neg(x0, {slot}u)",
    "abs": "asg_chk_abs(x0, {slot}u)",
}
CHECKED = "asg_chk_"  # the prefix of every checking function


def _overflow_slot(op: str) -> int:
    detail = (
        f"the exact int64 {op} result must fit the int32 range [-2**31, 2**31) that GPU "
        "buffers hold (int32 values wrap instead)"
    )
    return get_device().checks.slot("overflow", op, detail)


def _cast_expr(out_dtype: str, t_in: str) -> str:
    dtype = numpy_dtype(out_dtype)
    t_out = wgsl_type(dtype)
    if dtype == np.bool_:
        truthy = "asg_truthy(x0)" if t_in == "f32" else f"x0 != {zero(t_in)}"
        return f"select(0u, 1u, {truthy})"
    if t_in == "f32" and t_out == "i32":
        if dtype == np.int64:
            return f"asg_chk_f2i(x0, {_overflow_slot('cast')}u)"
        return "asg_f2i(x0)"
    return "x0" if t_in == t_out else f"{t_out}(x0)"


def expression(op: str, attrs: Attrs, in_types: Sequence[str], out_dtype: str) -> str | None:
    """The WGSL expression of an elementwise op over ``x0, x1, ...``, or None.

    ``in_types`` are the inputs' WGSL storage types; the expression yields the storage
    type of ``out_dtype``. Elementwise chains fuse by substituting one op's expression
    for an input of the next (see `asgrad.gpu.plan.fusion`).
    """
    int_checked = math_ops.checked_expression(op, out_dtype) if in_types[0] == "i32" else None
    if int_checked is not None:
        return int_checked
    if out_dtype == "int64" and op in CHECKED_INT64:
        return CHECKED_INT64[op].format(slot=_overflow_slot(op))
    if op in UNARY:
        return UNARY[op](attrs, in_types[0])
    if op in BINARY:
        return BINARY[op](attrs, in_types[0])
    if op in COMPARE:
        native, nan_aware = COMPARE[op]
        if in_types[0] == "f32":
            return f"select(0u, 1u, {nan_aware}(x0, x1))"
        return f"select(0u, 1u, x0 {native} x1)"
    if op == "where":
        return f"select(x2, x1, x0 != {zero(in_types[0])})"
    if op == "cast":
        return _cast_expr(out_dtype, in_types[0])
    if op in OPTIM_EXPRESSIONS:
        return OPTIM_EXPRESSIONS[op](attrs, in_types)
    return None


EXPRESSION_OPS = frozenset(
    {*UNARY, *BINARY, *COMPARE, "where", "cast", "left_shift", "floor_divide", "remainder"}
    | set(OPTIM_EXPRESSIONS)
)


def _lower_expression(op: str) -> Lowering:
    def lower_elementwise(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        expr = expression(op, attrs, [x.wgsl for x in ins], out.dtype)
        assert expr is not None
        return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)

    return lower_elementwise


def gelu_backward_expr(attrs: Attrs) -> str:
    """``g * GELU'(x)`` over ``x0 = g, x1 = x``."""
    if attrs.get("approximate", "none") == "tanh":
        k, a = 0.7978845608028654, 0.044715
        t = f"asg_tanh({literal(k)} * (x1 + {literal(a)} * x1 * x1 * x1))"
        du = f"{literal(k)} * (1.0 + {literal(3.0 * a)} * x1 * x1)"
        return f"x0 * (0.5 * (1.0 + {t}) + 0.5 * x1 * (1.0 - {t} * {t}) * {du})"
    pdf = "asg_exp(-0.5 * x1 * x1) * 0.3989422804014327"
    return f"x0 * (0.5 * (1.0 + asg_erf(x1 * 0.7071067811865476)) + x1 * {pdf})"


def _gelu_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return elementwise(gelu_backward_expr(attrs), ins, numpy_dtype(out.dtype), out.shape)


LOWERINGS: dict[str, Lowering] = {
    **{name: _lower_expression(name) for name in sorted(EXPRESSION_OPS - set(OPTIM_EXPRESSIONS))},
    "gelu_backward": _gelu_backward,
}
