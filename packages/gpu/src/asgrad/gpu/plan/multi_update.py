"""Multi-tensor updates: every parameter's update rule in one dispatch.

An optimizer's step is a few elementwise update rules per parameter (Adam: both
moments and the parameter; SGD with momentum: the buffer and the parameter). A plan
gathers them (`find_update_batch`): each *chain* is
the update rules that read one another's new values (``p' = f(p, m', v')``), all of
one element count; every
chain is launched at one point of the schedule, after the last of them would have
been, and the chains are packed into as few dispatches as the device's storage
bindings allow (`launch_update_batch`).

In one dispatch a chain is a *segment*: a run of workgroups whose threads each load
every input at their element, compute the chain's rules in order (a rule reads an
earlier rule's result as a value, not from memory) and store each result into its
variable's buffer, in place (an interior rule, which updates no variable, is only
computed). That is safe because every other reader of the old
values is launched earlier (the plan checks it), and a thread reads its element of a
variable before it writes that element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.copy import copy_into
from asgrad.gpu.device.source import kernel_text
from asgrad.gpu.lowering.elementwise import CHECKED, expression_tree
from asgrad.gpu.lowering.scalar import render_wgsl_lets, simplify, typed
from asgrad.gpu.plan.fusion import emit, materialize
from asgrad.gpu.plan.multi_sums import _THREADS, _contiguous, blocks_kernel, sum_lines
from asgrad.gpu.plan.update_chains import UpdateBatch
from asgrad.gpu.plan.values import Deferred, Product, Reshaped, Rows, Scattered, Summed, Value
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.scalar import Expr, arg, substitute

__all__ = ["launch_update_batch"]


# -- launching ----------------------------------------------------------------------------
@dataclass
class _Segment:
    """One chain as WGSL: its leaves (read), targets (written) and statements."""

    size: int
    leaves: list[Operand]  # read at the thread's element (size n) or at their offset
    targets: list[GpuArray | None]  # rule j's variable (None: an interior rule)
    body: list[str]  # statements over a{k} (leaf k), s{k} (sum k) and y{j} (rule j)
    sums: list[Summed] = field(default_factory=list)

    def buffers(self) -> set[int]:
        read = {id(o.array.buffer) for o in self.leaves}
        read |= {id(p.partials().arena.buffer) for p in self.sums}
        return read | {id(t.buffer) for t in self.targets if t is not None}


def launch_update_batch(
    batch: UpdateBatch,
    values: Mapping[int, Value],
    targets: Mapping[int, GpuArray],
    device: Device,
) -> None:
    """Record the batch's dispatches: every chain's rules into its variables' buffers.

    ``values`` holds the members' other inputs, the column sums and the products of
    split K (`asgrad.gpu.plan.fusion.product_pieces`) among them as `Summed` values
    the chains read as sums of their pieces; ``targets`` each member's variable
    array. A chain that cannot be one segment (an input that neither has the chain's
    element count nor is a scalar) is launched rule by rule into fresh buffers, then
    copied into its variables.
    """
    limit = int(device.limits.get("max-storage-buffers-per-shader-stage", 8))
    written = {id(t.buffer) for t in targets.values()}
    segments: list[_Segment] = []
    unfused: list[Sequence[Node]] = []
    for chain in batch.chains:  # inputs that need a kernel of their own launch here
        segment = _segment(chain, values, targets, written)
        if segment is None or len(segment.buffers()) > limit:
            unfused.append(chain)
        else:
            segments.append(segment)
    # every old value is read before the first variable is written
    results = {k: v for chain in unfused for k, v in _launch_unfused(chain, values).items()}
    group: list[_Segment] = []
    bound: set[int] = set()
    for segment in segments:
        if group and len(bound | segment.buffers()) > limit:
            _dispatch(group, device)
            group, bound = [], set()
        group.append(segment)
        bound |= segment.buffers()
    if group:
        _dispatch(group, device)
    for nid, result in results.items():
        if nid in targets:
            copy_into(result, targets[nid])


def _launch_unfused(chain: Sequence[Node], values: Mapping[int, Value]) -> dict[int, GpuArray]:
    """The chain's rules launched one by one into fresh buffers (a `Summed` input is
    launched as its sum)."""
    results: dict[int, GpuArray] = {}
    for node in chain:
        ins: list[Value] = [results[i.id] if i.id in results else values[i.id] for i in node.inputs]
        expr = expression_tree(node.op, node.attrs, [_wgsl(v) for v in ins], node.dtype)
        assert expr is not None
        results[node.id] = emit(expr, ins, TensorType(_shape(ins), node.dtype))
    return results


def _shape(ins: Sequence[Value]) -> tuple[int, ...]:
    shapes = [
        v.type.shape if isinstance(v, (Deferred, Scattered)) else materialize(v).shape for v in ins
    ]
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


def _wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


def _segment(
    chain: Sequence[Node],
    values: Mapping[int, Value],
    targets: Mapping[int, GpuArray],
    written: set[int],
) -> _Segment | None:
    stored = [m for m in chain if m.id in targets]  # the others are interior rules
    n = targets[stored[0].id].size
    own = {id(targets[m.id].buffer) for m in stored}
    leaves: list[Operand] = []
    body: list[str] = []
    summed: list[Summed] = []
    rule = {m.id: j for j, m in enumerate(chain)}

    def leaf(value: Operand) -> str:
        for k, other in enumerate(leaves):
            if _same(other, value):
                return f"a{k}"
        leaves.append(value)
        return f"a{len(leaves) - 1}"

    def fits(value: Value) -> bool:
        if isinstance(value, Summed):
            if value.array is None:
                return value.size == n  # its partial sums, added up at the element
            value = value.array  # launched as its sum for another reader
        if isinstance(value, Deferred) and value.array is not None:
            value = value.array  # stored by a row kernel
        if isinstance(value, Deferred):
            return all(fits(v) for v in value.inputs)
        if isinstance(value, (Product, Rows)) and value.array is not None:
            value = value.array  # stored by an earlier kernel's epilogue
        if isinstance(value, (Product, Scattered, Reshaped, Rows)):
            return False
        op = Operand.of(value)
        if op.array.wgsl not in ("f32", "f16", "i32", "u32"):
            return False
        size = math.prod(op.shape)
        if id(op.array.buffer) in own:
            return size == n and op.offset == 0 and _contiguous(op)
        if id(op.array.buffer) in written:
            return False  # another chain's variable: read it before the dispatch
        return size == 1 or (size == n and _contiguous(op))

    slots: list[tuple[str, str]] = []  # the names (and WGSL types) arg(k) stands for

    def slot(name: str, wgsl: str) -> Expr:
        if (name, wgsl) not in slots:
            slots.append((name, wgsl))
        return arg(slots.index((name, wgsl)))

    composed: dict[int, Expr] = {}

    def arguments(ins: Sequence[Value | Expr]) -> list[Expr]:
        args: list[Expr] = []
        for value in ins:
            if isinstance(value, Expr):
                args.append(value)
            elif isinstance(value, Summed) and value.array is None:
                if value not in summed:
                    summed.append(value)
                args.append(slot(f"s{summed.index(value)}", value.wgsl))
            elif isinstance(value, Deferred) and value.array is None:
                if id(value) not in composed:
                    inner = substitute(value.expr, arguments(value.inputs))
                    composed[id(value)] = typed(inner, value.wgsl)
                args.append(composed[id(value)])
            else:
                if isinstance(value, (Product, Rows, Deferred, Summed)) and value.array is not None:
                    value = value.array  # launched before
                assert not isinstance(value, (Deferred, Product, Scattered, Reshaped, Rows, Summed))
                op = Operand.of(value)
                args.append(slot(leaf(op), op.array.wgsl))
        return args

    for j, node in enumerate(chain):
        ins: list[Value | Expr] = []
        in_types: list[str] = []
        for inp in node.inputs:
            if inp.id in rule:
                wgsl = _rule_wgsl(inp, targets)
                ins.append(slot(f"y{rule[inp.id]}", wgsl))
                in_types.append(wgsl)
                continue
            value = values[inp.id]
            if not fits(value):
                value = materialize(value)  # launched before the dispatch
                if not fits(value):
                    return None
            ins.append(value)
            in_types.append(_wgsl(value))
        out_dtype = str(targets[node.id].dtype) if node.id in targets else node.dtype
        expr = expression_tree(node.op, node.attrs, in_types, out_dtype)
        if expr is None:
            return None
        args = arguments(ins)
        names, types = [n for n, _ in slots], [t for _, t in slots]
        out_type = _rule_wgsl(node, targets)
        key: tuple[object, ...] | None = None
        if all(a.op == "arg" for a in args):  # no fused input: the same for every tensor
            key = (id(expr), tuple(slots[int(str(a.value))] for a in args), out_type, j)
        cached = _RULES.get(key) if key is not None else None
        if cached is not None and cached[0] is expr:
            lets, text = cached[1], cached[2]
        else:
            tree = simplify(substitute(expr, args))
            lets, text = render_wgsl_lets(tree, names, types, out_type, f"r{j}_")
            if key is not None:
                if len(_RULES) >= _MAX_RULES:
                    _RULES.clear()
                _RULES[key] = (expr, lets, text)
        if any(CHECKED in line for line in [*lets, text]):
            return None
        body += [*lets, f"let y{j} = {text};"]
    if any(p.size != n for p in summed):
        return None
    return _Segment(n, leaves, [targets.get(m.id) for m in chain], body, summed)


def _rule_wgsl(node: Node, targets: Mapping[int, GpuArray]) -> str:
    """The WGSL type of a rule's value: its variable's, or float32 for an interior rule."""
    return targets[node.id].wgsl if node.id in targets else "f32"


# Rules rendered, by their op's expression (its identity, kept alive here), the names
# and types they read, their output type and position: the parameters of a model
# repeat a few rules.
_RULES: dict[tuple[object, ...], tuple[Expr, list[str], str]] = {}
_MAX_RULES = 1024


def _same(a: Operand, b: Operand) -> bool:
    return (
        a.array.buffer is b.array.buffer
        and a.offset == b.offset
        and math.prod(a.shape) == math.prod(b.shape)
        and a.array.wgsl == b.array.wgsl
    )


def _dispatch(segments: Sequence[_Segment], device: Device, name: str = "multi_update") -> None:
    """One kernel over ``segments``: each a run of workgroups, in order (``name``: its
    label's first word, the dispatch's kind, `asgrad.gpu.plan.dispatch_kinds`)."""
    slots: dict[int, int] = {}
    kinds: list[str] = []
    buffers = []
    types: list[str] = []
    for seg in segments:  # written buffers first, then the ones only read
        for t in seg.targets:
            if t is not None and id(t.buffer) not in slots:
                slots[id(t.buffer)] = len(kinds)
                kinds.append("write")
                buffers.append(t.buffer)
                types.append(t.wgsl)
    for seg in segments:
        for array in [o.array for o in seg.leaves] + [p.partials().arena for p in seg.sums]:
            if id(array.buffer) not in slots:
                slots[id(array.buffer)] = len(kinds)
                kinds.append("read")
                buffers.append(array.buffer)
                types.append(array.wgsl)
    decls = [
        f"@group(0) @binding({k}) var<storage, {'read_write' if kind == 'write' else 'read'}> "
        f"b{k}: array<{types[k]}>;"
        for k, kind in enumerate(kinds)
    ]
    blocks: list[str] = []
    start = 0
    for seg in segments:
        groups = -(-seg.size // _THREADS)
        lines = [f"    if (w < {start + groups}u) {{"]
        lines.append(f"        let i = (w - {start}u) * {_THREADS}u + li;")
        lines.append(f"        if (i < {seg.size}u) {{")
        for k, o in enumerate(seg.leaves):
            slot = slots[id(o.array.buffer)]
            where = f"{o.offset}u" if math.prod(o.shape) == 1 and seg.size != 1 else "i"
            if where == "i" and o.offset:
                where = f"i + {o.offset}u"
            lines.append(f"            let a{k} = b{slot}[{where}];")
        for k, p in enumerate(seg.sums):  # the partial sums, in order
            slot = slots[id(p.partials().arena.buffer)]
            lines += sum_lines(f"s{k}", p, f"b{slot}", "i", "            ")
        lines += [f"            {s}" for s in seg.body]
        for j, t in enumerate(seg.targets):
            if t is not None:
                lines.append(f"            b{slots[id(t.buffer)]}[i] = y{j};")
        lines += ["        }", "        return;", "    }"]
        blocks.append("\n".join(lines))
        start += groups
    source = blocks_kernel([kernel_text("prelude"), *decls], blocks)
    label = f"{len(segments)} tensors, {sum(s.size for s in segments)} elements"
    key = (name, label, (source,))  # a tuple part stays out of the label
    pipe = device.pipeline(key, lambda: source, tuple(kinds))
    device.dispatch(pipe, buffers, fold_groups(start, device.max_groups))
