"""The elementwise family on the GPU: one generated kernel for every elementwise op.

`elementwise` records ``out = expr(x0, x1, ...)`` with numpy broadcasting through
strides (``kernels/elementwise.wgsl``, with the per-primitive helpers of
``kernels/prelude.wgsl``). Each op is its scalar expression (`expression_tree`:
``OpDef.expression``), so a chain of them fuses by substituting one op's tree into
the next (`asgrad.gpu.plan.fusion`) and `elementwise_tree` renders the whole once; no
op has WGSL of its own here but the integer ops that check their values. Other
families use `elementwise` for copies, strided views and fills.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.gpu.device import fold_groups, get_device
from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides
from asgrad.gpu.device.checks import checks_source
from asgrad.gpu.device.source import kernel_text, numpy_dtype, render, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.scalar import render_wgsl, render_wgsl_lets, simplify, wgsl_call
from asgrad.tensor import TensorType, all_ops, get_op
from asgrad.tensor.ir.scalar import Expr, arg, build

__all__ = [
    "EXPRESSION_OPS",
    "LOWERINGS",
    "MAX_INPUTS",
    "MAX_RANK",
    "WGSL_FILES",
    "checked_expression",
    "elementwise",
    "elementwise_tree",
    "expression",
    "expression_tree",
    "item_reads",
    "max_inputs",
    "strided_copy",
]

WGSL_FILES: tuple[str, ...] = ("elementwise.wgsl", "elementwise_items.wgsl", "prelude.wgsl")

MAX_INPUTS = 7  # 8 storage buffers per stage (WebGPU default): 7 inputs + the output
MAX_RANK = 8
OUT_SLOT = 7  # params slot of the output's strides and offset


def _source(
    expr: str,
    lets: Sequence[str],
    in_types: tuple[str, ...],
    out_type: str,
    modes: tuple[str, ...],
    out_mode: str,
    rank: int,
    own: tuple[bool, ...],
    bound: list[int],
    items: int = 1,
    reads: tuple[str, ...] = (),
) -> str:
    """The WGSL of one elementwise kernel: bindings, index arithmetic, loads, ``expr``
    (``items`` elements per invocation where every operand is read as ``reads`` say:
    `_items_source`)."""
    bindings = [
        f"@group(0) @binding({j + 1}) var<storage, read> in{k}: array<{in_types[k]}>;"
        for j, k in enumerate(bound)
    ]
    bindings.append(
        f"@group(0) @binding({len(bound) + 1}) var<storage, read_write> out: array<{out_type}>;"
    )
    if CHECKED in expr or any(CHECKED in s for s in lets):
        bindings.append(checks_source(len(bound) + 2))
    if items > 1:
        return _items_source(expr, lets, in_types, out_type, reads, own, bindings, items)
    strided = [k for k, m in enumerate(modes) if m == "strided"]
    if out_mode == "strided":
        strided.append(OUT_SLOT)
    index: list[str] = []
    if strided:
        index += [f"    var o{k} = mu({76 + k}u);" for k in strided]
        index += offset_lines("i", [(f"o{k}", k) for k in strided], rank, "mu")
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
        LETS="\n".join(f"    {s}" for s in lets),
        EXPR=expr,
        OUT_INDEX=out_index,
    )


def _items_source(
    expr: str,
    lets: Sequence[str],
    in_types: tuple[str, ...],
    out_type: str,
    reads: tuple[str, ...],
    own: tuple[bool, ...],
    bindings: list[str],
    items: int,
) -> str:
    """The WGSL of an elementwise kernel whose operands are each read at a function of
    the element's flat index (`item_reads`), where each invocation computes ``items``
    elements 256 apart (each load and store of a subgroup coalesced): every load first,
    then the values, then the stores, so ``items`` loads of each input are in flight
    together (a store before a load could alias it: the compiler would keep their
    order). ``expr`` is a function of the element's inputs (and its index ``i``)."""
    params = ", ".join(["i: u32", *(f"x{k}: {t}" for k, t in enumerate(in_types))])
    body = [f"fn value({params}) -> {out_type} {{", *(f"    {s}" for s in lets)]
    body += [f"    return {expr};", "}"]
    lines = [
        f"    let first = (wid.x + wid.y * nwg.x) * {256 * items}u + li;",
        "    let n = mu(0u);",
        "    if (first >= n) {",
        "        return;",
        "    }",
    ]
    # past the end, an invocation recomputes the last element (its store skipped)
    lines += [f"    let i{j} = min(first + {256 * j}u, n - 1u);" for j in range(items)]
    for k, read in enumerate(reads):
        source_array = "out" if own[k] else f"in{k}"
        if read == "scalar":
            lines.append(f"    let x{k} = {source_array}[mu({76 + k}u)];")
            continue
        for j in range(items):
            at = read.format(i=f"i{j}")
            lines.append(f"    let x{k}_{j} = {source_array}[{at} + mu({76 + k}u)];")
    for j in range(items):
        args = [f"i{j}", *(f"x{k}" if r == "scalar" else f"x{k}_{j}" for k, r in enumerate(reads))]
        lines.append(f"    let v{j} = value({', '.join(args)});")
    lines.append(f"    out[first + mu({76 + OUT_SLOT}u)] = v0;")
    for j in range(1, items):
        lines += [
            f"    if (first + {256 * j}u < n) {{",
            f"        out[i{j} + mu({76 + OUT_SLOT}u)] = v{j};",
            "    }",
        ]
    return render(
        "elementwise_items",
        PRELUDE=kernel_text("prelude"),
        BINDINGS="\n".join(bindings),
        VALUE="\n".join(body),
        BODY="\n".join(lines),
    )


def item_reads(
    shape: tuple[int, ...], strides: Sequence[tuple[int, ...]], modes: tuple[str, ...]
) -> tuple[str, ...] | None:
    """Each operand's index as a WGSL expression of the element's flat index ``{i}``
    (``"scalar"``: one value), where every operand over the collapsed ``shape`` is
    contiguous, one value, or, over two dims ``(M, N)``, broadcast along one of them:
    a row of N (a bias) read at ``i % N``, a column of M at ``i / N``, N compiled in (a
    multiply and shift, or a mask, where a uniform's divisor would cost a division
    per element); None for any other operand.

    >>> item_reads((8192, 512), [(512, 1), (0, 1), (1, 0)], ("contig", "strided", "strided"))
    ('{i}', '{i} % 512u', '{i} / 512u')
    """
    reads = []
    for st, mode in zip(strides, modes, strict=True):
        if mode == "strided" and len(shape) == 2 and st in ((0, 1), (1, 0)):
            reads.append(f"{{i}} % {shape[1]}u" if st == (0, 1) else f"{{i}} / {shape[1]}u")
        elif mode == "strided":
            return None
        else:
            reads.append("{i}" if mode == "contig" else "scalar")
    return tuple(reads)


# Elements each invocation of an elementwise kernel over contiguous operands computes,
# where the output has at least ITEMS_FROM elements: one load of each input per
# invocation keeps too few bytes in flight for a large GPU's memory bandwidth. A smaller
# output keeps one per invocation: its launch is short of workgroups, not of loads
# (2**20 elements are 1,024 workgroups of 4 each, several per SM of an H200).
ITEMS = 4
ITEMS_FROM = 1 << 20


def max_inputs(expr: str) -> int:
    """Inputs a kernel of ``expr`` may bind: one fewer when it checks (the check slots)."""
    return MAX_INPUTS - (CHECKED in expr)


def offset_lines(flat: str, offsets: Sequence[tuple[str, int]], rank: int, meta: str) -> list[str]:
    """WGSL adding to each offset variable (its name and its operand's slot ``k``) the
    coordinates of the flat index ``flat`` over ``rank`` dims times that operand's strides,
    read through the uniform accessor ``meta``: the dims at ``4 + d``, operand k's stride
    of dim d at ``12 + 8 * k + d`` (the layout of the elementwise kernel's uniform)."""
    lines = [f"    var rem = {flat};"]
    for d in range(rank - 1, -1, -1):
        if d == 0:
            lines.append("    let c0 = rem;")
        else:
            lines.append(f"    let c{d} = rem % {meta}({4 + d}u);")
            lines.append(f"    rem = rem / {meta}({4 + d}u);")
        lines += [f"    {name} += c{d} * {meta}({12 + 8 * k + d}u);" for name, k in offsets]
    return lines


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
    lets: Sequence[str] = (),
) -> GpuArray:
    """Record ``out = expr(x0, x1, ...)`` elementwise with numpy broadcasting.

    ``expr`` is a WGSL expression over ``x0..x{n-1}`` (each of its input's storage
    type) that yields the output's storage type; functions of ``prelude.wgsl`` may be
    used. ``out`` may be an `Operand`: a strided view of a larger buffer (a
    slice, say), whose shape is the output shape. ``lets`` are WGSL statements run
    before ``expr`` (``let t0 = ...;``: values it reads more than once). Returns the
    array written.
    """
    ops = [Operand.of(x) for x in inputs]
    whole = "\n".join([*lets, expr])
    if len(ops) > max_inputs(whole):
        raise GpuUnsupportedError(f"an elementwise kernel takes at most {max_inputs(whole)} inputs")
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

    checked = CHECKED in whole
    binds = ("uniform",) + ("read",) * len(bound) + ("write",) + ("checks",) * checked
    device = target.device
    reads = item_reads(shape, strides[: len(ops)], modes) if out_mode == "contig" else None
    items = ITEMS if reads is not None and n >= ITEMS_FROM else 1
    key: tuple[object, ...] = ("elementwise", expr, modes, out_mode, rank, in_types, out_type)
    key += (own, tuple(lets))
    if items > 1:
        assert reads is not None
        key += (f"items{items}", reads)
    pipe = device.pipeline(
        key,
        lambda: _source(
            expr, lets, in_types, out_type, modes, out_mode, rank, own, bound, items, reads or ()
        ),
        binds,
    )
    params = device.params(struct.pack(f"<{len(meta)}I", *meta))
    buffers = (params, *(ops[k].array.buffer for k in bound), target.buffer)
    if checked:
        buffers = (*buffers, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-n // (256 * items)), device.max_groups))
    return target


def strided_copy(x: Operand, out: TensorType) -> GpuArray:
    """A contiguous copy of the view ``x``, of ``out``'s shape and dtype."""
    return elementwise("x0", [x], numpy_dtype(out.dtype), out.shape)


# int64 values live in int32 storage: these ops check that their result fits
# (kernels/checks.wgsl); int32 arithmetic wraps, as numpy's does. Integer division,
# remainder and powers flag a zero divisor or a negative power. A check needs a slot of
# the device's check buffer, which a scalar expression has no place for: these few
# integer forms are the GPU's own (a `wgsl_call` node), every other op is its
# expression rendered.
CHECKED_INT64: dict[str, str] = {
    "add": "asg_chk_add({0}, {1}, {slot}u)",
    "sub": "asg_chk_sub({0}, {1}, {slot}u)",
    "mul": "asg_chk_mul({0}, {1}, {slot}u)",
    "neg": "asg_chk_neg({0}, {slot}u)",
    "abs": "asg_chk_abs({0}, {slot}u)",
    "left_shift": "asg_chk_shl64({0}, {1}, {slot}u)",
    "cast": "asg_chk_f2i({0}, {slot}u)",
}
CHECKED_DIVISION = {
    "floor_divide": "asg_chk_floordiv",
    "remainder": "asg_chk_mod",
    "pow": "asg_chk_ipow",
}
CHECKED = "asg_chk_"  # the prefix of every checking function


def _slot(kind: str, op: str, detail: str) -> int:
    return get_device().checks.slot(kind, op, detail)


def _overflow_slot(op: str) -> int:
    detail = (
        f"the exact int64 {op} result must fit the int32 range [-2**31, 2**31) that GPU "
        "buffers hold (int32 values wrap instead)"
    )
    return _slot("overflow", op, detail)


def checked_expression(op: str, in_types: Sequence[str], out_dtype: str) -> Expr | None:
    """The expression of an integer op that checks its values (a `wgsl_call` over
    ``arg(0), arg(1)...``), or None."""
    wide = out_dtype == "int64"
    args = [arg(k) for k in range(len(in_types))]
    if op in CHECKED_DIVISION and in_types[0] == "i32":
        if op == "pow":
            what = "a negative integer power has no integer result; cast to float first"
        else:
            what = "integer division by zero has no result; mask the divisor first"
        bad = _slot("arithmetic", op, what)
        ovf = _overflow_slot(op) if wide else 0
        call = f"{CHECKED_DIVISION[op]}({{0}}, {{1}}, {bad}u, {ovf}u, {str(wide).lower()})"
        return wgsl_call(call, args, "i32", ("i32", "i32"))
    if not wide or op not in CHECKED_INT64:
        return None
    if op == "cast" and in_types[0] not in ("f32", "f16"):
        return None
    call = CHECKED_INT64[op].replace("{slot}", str(_overflow_slot(op)))
    return wgsl_call(call, args, "i32", ["f32" if op == "cast" else "i32"] * len(args))


def expression_tree(op: str, attrs: Attrs, in_types: Sequence[str], out_dtype: str) -> Expr | None:
    """The scalar expression of an elementwise op over ``arg(0), arg(1)...`` as the GPU
    computes it, or None: the op's own (``OpDef.expression``), but for the integer ops
    that check their values (`checked_expression`). ``in_types`` are the inputs' WGSL
    storage types. A fused kernel substitutes one op's tree for an input of the next
    (`asgrad.gpu.plan.fusion`) and renders the whole once (`elementwise_tree`)."""
    if op not in EXPRESSION_OPS:
        return None
    checked = checked_expression(op, in_types, out_dtype)
    if checked is not None:
        return checked
    plain = all(_plain(v) for v in attrs.values())
    key = (op, repr(sorted(attrs.items())), len(in_types), out_dtype)
    tree = _TREES.get(key) if plain else None
    if tree is None:
        opdef = get_op(op)
        assert opdef.expression is not None
        tree = build(opdef.expression, len(in_types), opdef.normalize_attrs(attrs), out_dtype)
        if plain:
            if len(_TREES) >= _MAX_TREES:
                _TREES.clear()
            _TREES[key] = tree
    return tree


def _plain(value: object) -> bool:
    """An attribute whose ``repr`` tells it apart (a number, a string, a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


# Expressions built, by op, attributes, arity and dtype (an `Expr` is immutable): a
# plan builds the same few many times.
_TREES: dict[tuple[str, str, int, str], Expr] = {}
_MAX_TREES = 4096


def expression(op: str, attrs: Attrs, in_types: Sequence[str], out_dtype: str) -> str | None:
    """The WGSL expression of an elementwise op over ``x0, x1, ...``, or None: its
    `expression_tree` rendered (`asgrad.gpu.lowering.scalar.render_wgsl`), yielding the
    storage type of ``out_dtype``."""
    e = expression_tree(op, attrs, in_types, out_dtype)
    if e is None:
        return None
    out = wgsl_type(numpy_dtype(out_dtype))
    return render_wgsl(e, [f"x{k}" for k in range(len(in_types))], in_types, out)


def elementwise_tree(
    e: Expr,
    inputs: Sequence[GpuArray | Operand],
    out_dtype: Any = np.float32,
    out_shape: tuple[int, ...] | None = None,
    out: GpuArray | Operand | None = None,
) -> GpuArray:
    """`elementwise` of the scalar expression ``e`` over ``inputs`` (``arg(k)``: input
    k), simplified and rendered once: a subexpression read several times is computed
    once (`asgrad.gpu.lowering.scalar.render_wgsl_lets`), constants are folded."""
    target = out.array if isinstance(out, Operand) else out
    storage = target.wgsl if target is not None else wgsl_type(np.dtype(out_dtype))
    types = [Operand.of(x).array.wgsl for x in inputs]
    names = [f"x{k}" for k in range(len(inputs))]
    lets, body = render_wgsl_lets(simplify(e), names, types, storage)
    return elementwise(body, inputs, out_dtype, out_shape, out, lets)


# Every op whose nodes a GPU plan runs as an expression: the primitive ops that have one.
EXPRESSION_OPS = frozenset(
    op.name for op in all_ops() if op.expression is not None and op.primitive
)


def _lower_expression(op: str) -> Lowering:
    def lower_elementwise(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        expr = expression(op, attrs, [x.wgsl for x in ins], out.dtype)
        assert expr is not None
        return elementwise(expr, ins, numpy_dtype(out.dtype), out.shape)

    return lower_elementwise


LOWERINGS: dict[str, Lowering] = {
    name: _lower_expression(name)
    for name in sorted(EXPRESSION_OPS)
    if get_op(name).family == "elementwise"
}
