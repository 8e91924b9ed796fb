"""Loops in a whole-step kernel: a ``scan`` written as a ``for`` loop over its steps.

The numpy ``scan`` kernel calls the body's generated function once per time step (a
Python call, and a numpy call per op, every step). In a whole-step kernel
(`asgrad.tensor.cpu.jit.step`) the scan is instead one loop of the kernel, and the
body's ops are written inside it by the same emitters as the step's own ops, at the
body's exact types: the forward scan, and the backward scan its gradient makes (a
scan like any other, whose body replays a forward step and differentiates it), with
no call back into Python. Its result is the packed vector of `asgrad.tensor.ops.control`
in a work buffer: the final carries (which are also the carries the steps update in
place), the stacked per-step outputs and, when saved, the carries each step started
from; ``scan_part`` is a view of it and ``scan_unpart`` a zeroed copy with one part.

Inside the body, an elementwise op whose only reader is another elementwise op of its
shape (or a reduction) is not stored: its expression is written into its reader's
loop (`fused`), so a cell's gate arithmetic (sigmoids, tanh, products) runs as a few
loops per step rather than one per op; products call BLAS (`emit_ops.BLAS_AT`). A
product's operand that is the same transposed argument every step (a recurrent weight
read as ``W.T``) is copied into a contiguous buffer once, before the loop
(`Kernel.hoist`): a (16, 64) @ (64, 256) product reading it transposed took 6.9 us
through BLAS against 3.2 us reading the copy.

Each time loop is written as a function of its own, which the kernel calls
(`Kernel.outline`): LLVM optimises the short function better than the loop inside
a long kernel.

A body with an op that has no Numba lowering (or one its emitter declines) raises
`UnsupportedError` naming the op and the body: the whole step then stays on the
line-by-line function, whose numpy ``scan`` kernel runs the body step by step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from asgrad.tensor.cpu.jit.emit import (
    Kernel,
    UnsupportedError,
    Val,
    broadcast_index,
    flat_val,
    literal,
)
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType, get_op

if TYPE_CHECKING:
    from asgrad.tensor.cpu.records import Ref
    from asgrad.tensor.ir.schedule import Schedule
    from asgrad.tensor.loops.body import Body

__all__ = ["LOOP_STEP_WORK", "emit_scan", "emit_scan_part", "emit_scan_unpart", "loop_work"]

# The most scalar work (`Kernel.flops`) one step of a loop may do in a whole step, and
# what the step may add per step of its loops (on top of `step.WORK_LIMIT`). A step of
# the numpy kernel costs a Python call of the body (about 29 us) and a numpy call per
# op; compiled, it costs its loops (each time loop a function of its own:
# `Kernel.outline`). Measured on a 2-layer LSTM training step of 128 time steps
# (batch 16, one BLAS thread, CPU time, the shared 2-core machine at a load average of
# 6-9): the whole step took 20.7 ms against 46.7 ms line by line at hidden 64 (69,632
# operations a loop step) and 64.8 ms against 79.9 ms at hidden 128 (139,264). Larger
# steps are not measured; the limit is the next power of two.
LOOP_STEP_WORK = 1 << 18

# An expression longer than this (source characters) is stored rather than fused, so
# that a reader using its operand twice cannot grow the source without bound.
FUSE_TEXT_LIMIT = 400

# The ops that read each element of an operand once (a fused operand is computed once).
_REDUCTIONS = ("sum", "mean", "max", "min", "sum_to_like")


def _types(vals: Sequence[Val]) -> list[TensorType]:
    return [TensorType(v.shape, v.dtype) for v in vals]


def _parts(node: Node, ins: Sequence[Val]) -> tuple[list[TensorType], int]:
    return _parts_of_types(node, _types(ins))


def _parts_of_types(node: Node, types: Sequence[TensorType]) -> tuple[list[TensorType], int]:
    from asgrad.tensor.ops.control import layout

    attrs = {k: v for k, v in node.attrs.items() if k != "part"}
    return layout(types, attrs)


def _views(packed: Val, parts: Sequence[TensorType]) -> list[Val]:
    """The parts of a packed value (C-contiguous in a flat buffer), as views."""
    assert packed.flat is not None
    buf, off = packed.flat
    views = []
    for p in parts:
        views.append(flat_val(buf, off, p.shape, p.dtype))
        off += math.prod(p.shape)
    return views


def _step_view(x: Val, t: str) -> Val:
    """Step ``t`` (a loop index) of ``x``: a view of its leading axis."""
    array = f"{x.array}[{t}]" if x.array is not None and len(x.shape) > 1 else None
    return Val(x.shape[1:], x.dtype, lambda idx: x.at([t, *idx]), array=array)


def emit_scan(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """A ``scan`` node as a loop of the kernel (see the module docstring)."""
    loop: Body = node.attrs["loop"]
    parts, length = _parts(node, ins)
    nc, nx = loop.n_carry, loop.n_x
    step_types = [TensorType(v.shape[1:], v.dtype) for v in ins[nc : nc + nx]]
    in_types = [*_types(ins[:nc]), *step_types, *_types(ins[nc + nx :])]
    body = loop.at([t.dtype for t in in_types])
    packed = k.alloc(out_t.shape, out_t.dtype)
    views = _views(packed, parts)
    ny = body.n_y
    carries, ys, saved = views[:nc], views[nc : nc + ny], views[nc + ny :]
    for c, init in zip(carries, ins[:nc], strict=True):
        k.copy(c, init)
    if length == 0:
        return packed
    t = k.fresh("t")
    order = f"range({length - 1}, -1, -1)" if node.attrs["reverse"] else f"range({length})"
    outer = k.loop_head, k.loop_index
    k.loop_head, k.loop_index = len(k.body), t
    k.line(0, f"for {t} in {order}:")
    k.indent += 1
    before = k.flops
    try:
        for view, c in zip(saved, carries if saved else [], strict=True):
            k.copy(_step_view(view, t), c)
        inputs = [*carries, *(_step_view(x, t) for x in ins[nc : nc + nx]), *ins[nc + nx :]]
        fed = {n.name: v for n, v in zip(body.inputs, inputs, strict=True)}
        mark = dict(k.work)
        slots = [_step_view(view, t) for view in ys]
        outs = emit_body(k, body, in_types, fed, [*([None] * nc), *slots])
        for slot, y in zip(slots, outs[nc:], strict=True):
            if y is not slot:
                k.copy(slot, y)
        # A new carry computed this step (in a buffer allocated inside the loop, or a
        # slot of the stacked outputs) cannot read a carry; any other (a carry passed on,
        # a view of one) is copied out first, so that the carries are replaced at once.
        news = [
            v if _fresh(v, mark) or any(v is s for s in slots) else _stored(k, v) for v in outs[:nc]
        ]
        for c, new in zip(carries, news, strict=True):
            if new is not c:
                k.copy(c, new)
    finally:
        k.indent -= 1
        start = k.loop_head  # past what the body hoisted before the loop
        k.loop_head, k.loop_index = outer
    per_step = k.flops - before
    if per_step > LOOP_STEP_WORK:
        raise UnsupportedError(
            f"a loop step of more than {LOOP_STEP_WORK:,} operations ({per_step:,}) in"
            f" {body.describe()}: numpy's kernels run it faster"
        )
    k.flops = before + per_step * length
    k.outline(start)
    return packed


def loop_work(nodes: Sequence[Node], types: Mapping[int, TensorType]) -> int:
    """The scalar work a whole step may add for the loops of ``nodes`` (its needed
    nodes at ``types``): `LOOP_STEP_WORK` per step of each ``scan``."""
    total = 0
    for node in nodes:
        if node.op == "scan":
            _, length = _parts_of_types(node, [types[n.id] for n in node.inputs])
            total += LOOP_STEP_WORK * length
    return total


def _stored(k: Kernel, v: Val) -> Val:
    """``v`` copied into a new buffer."""
    out = k.alloc(v.shape, v.dtype)
    k.copy(out, v)
    return out


def _fresh(v: Val, mark: Mapping[str, int]) -> bool:
    if v.flat is None:
        return False
    buf, off = v.flat
    return buf.startswith("W_") and off >= mark.get(buf[2:], 0)


def emit_scan_part(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``scan_part``: a view of the packed value."""
    parts, _ = _parts(node, ins[1:])
    packed = ins[0] if ins[0].flat is not None else k.materialize(ins[0])
    return _views(packed, parts)[int(node.attrs["part"])]


def emit_scan_unpart(k: Kernel, node: Node, ins: Sequence[Val], out_t: TensorType) -> Val:
    """``scan_unpart``: zeros of the packed size with one part written."""
    parts, _ = _parts(node, ins[1:])
    out = k.alloc(out_t.shape, out_t.dtype)
    idx, depth = k.loops(out_t.shape, 0)
    k.line(depth, f"{out.at(idx)} = {literal(0, out_t.dtype)}")
    k.flops += math.prod(out_t.shape)
    k.copy(_views(out, parts)[int(node.attrs["part"])], ins[0])
    return out


def emit_body(
    k: Kernel,
    body: Body,
    types: Sequence[TensorType],
    fed: Mapping[str, Val],
    slots: Sequence[Val | None] = (),
) -> list[Val]:
    """The body's outputs (new carries, then ys) written into ``k`` from its inputs'
    values ``fed`` (by name), at the inputs' ``types``. An output with a ``slots``
    entry (by position) that an elementwise op or a ``concat`` computes is written
    straight into it (no copy after): its returned value is then that slot."""
    from asgrad.tensor.cpu.codegen import value_refs
    from asgrad.tensor.cpu.jit.step import needed_nodes, value_reader

    schedule = body.schedule()
    shapes = {n.name: t.shape for n, t in zip(body.inputs, types, strict=True)}
    node_types = schedule.infer_types(shapes)
    refs, registered = value_refs(schedule, node_types)
    roots = [n.id for n in schedule.outputs]
    needed = needed_nodes(schedule, refs, roots)
    readers = _readers(schedule, refs, needed)
    vals: dict[int, Val] = {}

    value = value_reader(k, refs, vals)
    into: dict[int, Val] = {}
    for out, slot in zip(schedule.outputs, slots, strict=False):
        ref = refs[out.id]
        if slot is not None and not ref.is_const:
            into.setdefault(ref.id, slot)

    for node in schedule.nodes:
        if node.id not in needed or refs[node.id].id != node.id or refs[node.id].is_const:
            continue
        t = node_types[node.id]
        if 0 in t.shape:
            raise UnsupportedError(f"an empty value in {body.describe()}")
        if node.op == "input":
            vals[node.id] = fed[node.name]
            continue
        if node.op == "parameter" or not registered(node.op):
            raise UnsupportedError(f"no Numba lowering of {node.op!r} in {body.describe()}")
        from asgrad.tensor.cpu.lowering import resolve

        op = get_op(node.op)
        emit = resolve(op).emit
        if emit is None:
            raise UnsupportedError(f"no Numba lowering of {node.op!r} in {body.describe()}")
        ins = [value(n.id) for n in node.inputs]
        lazy = None
        if op.expression is not None and node.id not in roots:
            lazy = fused(k, node, ins, t, readers.get(node.id), node_types)
        if lazy is not None:
            vals[node.id] = lazy
            continue
        slot = into.get(node.id) if op.expression is not None or node.op == "concat" else None
        # An elementwise op's emitter and concat's allocate their result first: the slot.
        k.target = slot
        try:
            vals[node.id] = emit(k, node, ins, t)
        finally:
            taken, k.target = k.target is None, None
        if slot is not None and taken and vals[node.id] is not slot:
            # The slot held something else (its result might be a view of it).
            raise UnsupportedError(f"{node.op!r} wrote its result apart from its slot")
    return [value(n.id) for n in schedule.outputs]


def _readers(
    schedule: Schedule, refs: Mapping[int, Ref], needed: set[int]
) -> dict[int, Node | None]:
    """Per value, its only reader (None when it has several, or is read twice)."""
    readers: dict[int, Node | None] = {}
    for node in schedule.nodes:
        if node.id not in needed or refs[node.id].id != node.id:
            continue
        for n in node.inputs:
            rid = refs[n.id].id
            readers[rid] = None if rid in readers else node
    return readers


def fused(
    k: Kernel,
    node: Node,
    ins: Sequence[Val],
    out_t: TensorType,
    reader: Node | None,
    types: Mapping[int, TensorType],
) -> Val | None:
    """An elementwise node's value written into its only reader's loop (a `Val` whose
    element is the expression), or None when it must be stored: its reader reads an
    element more than once (a product, a broadcast) or is not a loop over elements."""
    if reader is None or not out_t.shape:
        return None
    rop = get_op(reader.op)
    if rop.expression is None and reader.op not in _REDUCTIONS:
        return None
    if rop.expression is not None and types[reader.id].shape != out_t.shape:
        return None
    from asgrad.tensor.cpu.jit.render import cost, render_numba
    from asgrad.tensor.cpu.lowering import expression_of

    expr = expression_of(get_op(node.op), node, out_t.dtype)
    dtypes = [v.dtype for v in ins]
    shape = out_t.shape
    sample = render_numba(expr, [v.at(["i"] * len(v.shape)) for v in ins], dtypes, out_t.dtype)
    if len(sample) > FUSE_TEXT_LIMIT:
        return None
    k.flops += (cost(expr) - 1) * math.prod(shape)

    def at(idx: Sequence[str]) -> str:
        elems = [v.at(broadcast_index(v.shape, shape, idx)) for v in ins]
        return f"({render_numba(expr, elems, dtypes, out_t.dtype)})"

    return Val(shape, out_t.dtype, at)


Emitters = Mapping[str, Callable[[Kernel, Node, Sequence[Val], TensorType], Val]]
EMITTERS: Emitters = {
    "scan": emit_scan,
    "scan_part": emit_scan_part,
    "scan_unpart": emit_scan_unpart,
}
