"""Multi-tensor updates: every parameter's update rule in one dispatch.

An optimizer's step is a few elementwise update rules per parameter (Adam: both
moments and the parameter; SGD with momentum: the buffer and the parameter). A plan
gathers them (:func:`find_update_batch`): each *chain* is the update rules that read
one another's new values (``p' = f(p, m', v')``), all of one element count; every
chain is launched at one point of the schedule, after the last of them would have
been, and the chains are packed into as few dispatches as the device's storage
bindings allow (:func:`launch_update_batch`).

In one dispatch a chain is a *segment*: a run of workgroups whose threads each load
every input at their element, compute the chain's rules in order (a rule reads an
earlier rule's result as a value, not from memory) and store each result into its
variable's buffer, in place. That is safe because every other reader of the old
values is launched earlier (the plan checks it), and a thread reads its element of a
variable before it writes that element.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asgrad.gpu.array import GpuArray, Operand
from asgrad.gpu.copy import copy_into
from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.fusion import (
    VIEW_OPS,
    Deferred,
    Product,
    Reshaped,
    Scattered,
    Value,
    emit,
    materialize,
    sums_batch,
)
from asgrad.gpu.lowering.elementwise import CHECKED, EXPRESSION_OPS, expression
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.gpu.source import kernel_text, numpy_dtype, wgsl_type
from asgrad.tensor import TensorType
from asgrad.tensor.graph import Node, Variable
from asgrad.tensor.schedule import Schedule

__all__ = ["UpdateBatch", "find_update_batch", "launch_update_batch"]

_THREADS = 256
_OPERAND = re.compile(r"\bx(\d+)\b")


@dataclass
class UpdateBatch:
    """The update chains launched together after schedule step ``step``."""

    chains: list[list[Node]]  # each in schedule order
    variables: dict[int, Variable]  # member node id -> the variable it updates
    step: int
    members: frozenset[int] = field(default_factory=frozenset)
    # column sums (a bias's gradient) read only by one chain: id -> rows summed
    sums: dict[int, int] = field(default_factory=dict)


def find_update_batch(
    schedule: Schedule,
    users: Mapping[int, list[Node]],
    types: Mapping[int, TensorType],
    launch_step: Mapping[int, int],
    readers: Mapping[int, list[Node]],
) -> UpdateBatch | None:
    """The update chains a plan can launch together, or None.

    A member is a float32 elementwise update value that nothing but other members
    reads; a chain is a connected set of members of one element count. ``readers``
    gives, for each member, the nodes reading its variable's old value (through views
    too); each must be launched by the batch's step (``launch_step``, where inlined
    nodes count at their users' kernels and members at the batch's step) or be a
    member of the same chain reading the value directly.
    """
    out_ids = {n.id for n in schedule.outputs}
    counts: dict[int, int] = {}
    for _, node in schedule.updates:
        counts[node.id] = counts.get(node.id, 0) + 1
    variables = {
        node.id: var
        for var, node in schedule.updates
        if counts[node.id] == 1
        and node.id not in out_ids
        and node.op in EXPRESSION_OPS
        and _is_f32(types[node.id])
    }
    if len({id(v) for v in variables.values()}) != len(variables):
        return None
    changed = True
    while changed:  # members read only by members
        changed = False
        for nid in list(variables):
            if any(u.id not in variables for u in users.get(nid, [])):
                del variables[nid]
                changed = True
    if not variables:
        return None
    index = {n.id: i for i, n in enumerate(schedule.nodes)}
    chains = _chains([n for n in schedule.nodes if n.id in variables], variables)
    chains = [c for c in chains if len({_size(types[n.id]) for n in c}) == 1]
    if not chains:
        return None
    step = max(index[n.id] for c in chains for n in c)
    chain_of = {n.id: k for k, c in enumerate(chains) for n in c}
    kept = []
    for k, chain in enumerate(chains):
        ok = True
        for node in chain:
            for reader in readers.get(node.id, []):
                if reader.id in chain_of:
                    direct = any(
                        inp.op == "parameter" and inp.attrs["variable"] is variables.get(m.id)
                        for m in chain
                        for inp in reader.inputs
                    )
                    ok &= chain_of[reader.id] == k and reader.op not in VIEW_OPS and direct
                elif launch_step.get(reader.id, step + 1) > step:
                    ok = False
        if ok:
            kept.append(chain)
    if not kept:
        return None
    members = frozenset(n.id for c in kept for n in c)
    sums = _column_sums(kept, users, types, out_ids | {n.id for _, n in schedule.updates})
    return UpdateBatch(kept, {i: variables[i] for i in members}, step, members, sums)


def _column_sums(
    chains: list[list[Node]],
    users: Mapping[int, list[Node]],
    types: Mapping[int, TensorType],
    kept: set[int],
) -> dict[int, int]:
    """The sums over leading axes (bias gradients) that only one chain reads: the batch
    sums them, instead of a reduction kernel each. id -> the rows each element sums."""
    sums: dict[int, int] = {}
    for chain in chains:
        ids = {m.id for m in chain}
        for member in chain:
            for node in member.inputs:
                if node.id in ids or node.id in kept or node.id in sums:
                    continue
                if not all(u.id in ids for u in users.get(node.id, [])):
                    continue
                rows = _leading_sum(node, types)
                if rows is None or node.inputs[0].op in _LEAF_LIKE:
                    continue
                src = node.inputs[0]
                if src.op == "matmul" and sums_batch(src, node, types):
                    continue  # one 2-D matmul already (fusion.Product)
                sums[node.id] = rows
    return sums


_LEAF_LIKE = frozenset({"input", "parameter", "constant"}) | VIEW_OPS


def _leading_sum(node: Node, types: Mapping[int, TensorType]) -> int | None:
    """The rows summed when ``node`` sums its input over leading axes only."""
    if node.op not in ("sum", "sum_to_like") or not _is_f32(types[node.id]):
        return None
    src = tuple(types[node.inputs[0].id].shape)
    out = tuple(types[node.id].shape)
    while out and out[0] == 1:
        out = out[1:]
    lead = len(src) - len(out)
    if lead < 1 or src[lead:] != out:
        return None
    if node.op == "sum":
        axis = node.attrs.get("axis")
        if axis is None:
            return None
        axes = sorted(a % len(src) for a in ((axis,) if isinstance(axis, int) else axis))
        if axes != list(range(lead)):
            return None
    rows = math.prod(src[:lead])
    return rows if rows > 1 else None


def _is_f32(t: TensorType) -> bool:
    try:
        return wgsl_type(numpy_dtype(t.dtype)) == "f32"
    except Exception:  # a dtype the GPU cannot hold
        return False


def _size(t: TensorType) -> int:
    return math.prod(t.shape)


def _chains(nodes: list[Node], members: Mapping[int, Variable]) -> list[list[Node]]:
    """Connected sets of ``nodes`` (linked when one reads another), in schedule order."""
    parent = {n.id: n.id for n in nodes}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for node in nodes:
        for inp in node.inputs:
            if inp.id in members:
                parent[root(inp.id)] = root(node.id)
    groups: dict[int, list[Node]] = {}
    for node in nodes:
        groups.setdefault(root(node.id), []).append(node)
    return list(groups.values())


# -- launching ----------------------------------------------------------------------------
@dataclass
class _Segment:
    """One chain as WGSL: its leaves (read), targets (written) and statements."""

    size: int
    leaves: list[Operand]  # read at the thread's element (size n) or at their offset
    targets: list[GpuArray]
    body: list[str]  # statements over a{k} (leaf k), s{k} (sum k) and y{j} (rule j)
    sums: list[_Partial] = field(default_factory=list)

    def buffers(self) -> set[int]:
        read = {id(o.array.buffer) for o in self.leaves} | {id(p.arena.buffer) for p in self.sums}
        return read | {id(t.buffer) for t in self.targets}


def launch_update_batch(
    batch: UpdateBatch,
    values: Mapping[int, Value],
    targets: Mapping[int, GpuArray],
    device: Device,
) -> None:
    """Record the batch's dispatches: every chain's rules into its variables' buffers.

    ``values`` holds the members' other inputs; ``targets`` each member's variable
    array. A chain that cannot be one segment (an input that neither has the chain's
    element count nor is a scalar) is launched rule by rule into fresh buffers, then
    copied into its variables.
    """
    limit = int(device.limits.get("max-storage-buffers-per-shader-stage", 8))
    written = {id(t.buffer) for t in targets.values()}
    partials = launch_column_sums(batch, values, device, limit)
    segments: list[_Segment] = []
    unfused: list[Sequence[Node]] = []
    for chain in batch.chains:  # inputs that need a kernel of their own launch here
        segment = _segment(chain, values, targets, written, partials)
        if segment is None or len(segment.buffers()) > limit:
            unfused.append(chain)
        else:
            segments.append(segment)
    # every old value is read before the first variable is written
    results = {
        k: v
        for chain in unfused
        for k, v in _launch_unfused(chain, values, batch.sums, partials).items()
    }
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
        copy_into(result, targets[nid])


def _launch_unfused(
    chain: Sequence[Node],
    values: Mapping[int, Value],
    sums: Mapping[int, int],
    partials: Mapping[int, _Partial],
) -> dict[int, GpuArray]:
    """The chain's rules launched one by one into fresh buffers."""
    results: dict[int, GpuArray] = {}
    for node in chain:
        for i in node.inputs:
            if i.id in sums and i.id not in results:
                results[i.id] = _finish_sum(partials[i.id])
        ins: list[Value] = [results[i.id] if i.id in results else values[i.id] for i in node.inputs]
        expr = expression(node.op, node.attrs, [_wgsl(v) for v in ins], node.dtype)
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
    partials: Mapping[int, _Partial],
) -> _Segment | None:
    n = targets[chain[0].id].size
    own = {id(targets[m.id].buffer) for m in chain}
    leaves: list[Operand] = []
    body: list[str] = []
    summed: list[_Partial] = []
    rule = {m.id: j for j, m in enumerate(chain)}

    def leaf(value: Operand) -> str:
        for k, other in enumerate(leaves):
            if _same(other, value):
                return f"a{k}"
        leaves.append(value)
        return f"a{len(leaves) - 1}"

    def fits(value: Value) -> bool:
        if isinstance(value, Deferred):
            return all(fits(v) for v in value.inputs)
        if isinstance(value, (Product, Scattered, Reshaped)):
            return False
        op = Operand.of(value)
        if op.array.wgsl not in ("f32", "i32", "u32"):
            return False
        size = math.prod(op.shape)
        if id(op.array.buffer) in own:
            return size == n and op.offset == 0 and _contiguous(op)
        if id(op.array.buffer) in written:
            return False  # another chain's variable: read it before the dispatch
        return size == 1 or (size == n and _contiguous(op))

    def build(template: str, ins: Sequence[Value | str]) -> str:
        parts: list[str] = []
        for value in ins:
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, Deferred):
                parts.append(f"({build(value.expr, value.inputs)})")
            else:
                assert not isinstance(value, (Product, Scattered, Reshaped))  # materialized
                parts.append(leaf(Operand.of(value)))
        return _OPERAND.sub(lambda m: parts[int(m.group(1))], template)

    for j, node in enumerate(chain):
        ins: list[Value | str] = []
        in_types: list[str] = []
        for inp in node.inputs:
            if inp.id in rule:
                ins.append(f"y{rule[inp.id]}")
                in_types.append(targets[inp.id].wgsl)
                continue
            if inp.id in partials:
                part = partials[inp.id]
                if part not in summed:
                    summed.append(part)
                ins.append(f"s{summed.index(part)}")
                in_types.append("f32")
                continue
            value = values[inp.id]
            if not fits(value):
                value = materialize(value)  # launched before the dispatch
                if not fits(value):
                    return None
            ins.append(value)
            in_types.append(_wgsl(value))
        expr = expression(node.op, node.attrs, in_types, str(targets[node.id].dtype))
        if expr is None or CHECKED in expr:
            return None
        body.append(f"let y{j} = {build(expr, ins)};")
    if any(p.size != n for p in summed):
        return None
    return _Segment(n, leaves, [targets[m.id] for m in chain], body, summed)


def _same(a: Operand, b: Operand) -> bool:
    return (
        a.array.buffer is b.array.buffer
        and a.offset == b.offset
        and math.prod(a.shape) == math.prod(b.shape)
        and a.array.wgsl == b.array.wgsl
    )


def _contiguous(op: Operand) -> bool:
    expected = 1
    for size, stride in zip(reversed(op.shape), reversed(op.strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _dispatch(segments: Sequence[_Segment], device: Device) -> None:
    """One kernel over ``segments``: each a run of workgroups, in order."""
    slots: dict[int, int] = {}
    kinds: list[str] = []
    buffers = []
    types: list[str] = []
    for seg in segments:  # written buffers first, then the ones only read
        for t in seg.targets:
            if id(t.buffer) not in slots:
                slots[id(t.buffer)] = len(kinds)
                kinds.append("write")
                buffers.append(t.buffer)
                types.append(t.wgsl)
    for seg in segments:
        for array in [o.array for o in seg.leaves] + [p.arena for p in seg.sums]:
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
            slot = slots[id(p.arena.buffer)]
            lines.append(f"            var s{k} = 0.0;")
            lines.append(f"            for (var c = 0u; c < {p.chunks}u; c++) {{")
            lines.append(f"                s{k} += b{slot}[{p.offset}u + c * {p.size}u + i];")
            lines.append("            }")
        lines += [f"            {s}" for s in seg.body]
        for j, t in enumerate(seg.targets):
            lines.append(f"            b{slots[id(t.buffer)]}[i] = y{j};")
        lines += ["        }", "        return;", "    }"]
        blocks.append("\n".join(lines))
        start += groups
    source = "\n".join(
        [
            kernel_text("prelude"),
            *decls,
            "",
            f"@compute @workgroup_size({_THREADS}, 1, 1)",
            "fn main(",
            "    @builtin(workgroup_id) wid: vec3<u32>,",
            "    @builtin(num_workgroups) nwg: vec3<u32>,",
            "    @builtin(local_invocation_index) li: u32,",
            ") {",
            "    let w = wid.x + wid.y * nwg.x;",
            *blocks,
            "}",
        ]
    )
    label = f"{len(segments)} tensors, {sum(s.size for s in segments)} elements"
    key = ("multi_update", label, (source,))  # a tuple part stays out of the label
    pipe = device.pipeline(key, lambda: source, tuple(kinds))
    device.dispatch(pipe, buffers, fold_groups(start, device.max_groups))


# -- column sums ------------------------------------------------------------------------
_CHUNK = 32  # rows a thread sums at least
_MAX_CHUNKS = 64  # partial sums each element of the update adds up


@dataclass(eq=False)
class _Partial:
    """A column sum as partial sums: ``arena[offset + c * size + i]`` for each chunk c."""

    arena: GpuArray
    offset: int
    chunks: int
    size: int


def launch_column_sums(
    batch: UpdateBatch, values: Mapping[int, Value], device: Device, limit: int
) -> dict[int, _Partial]:
    """Record the partial sums of every column sum of ``batch`` (one dispatch per
    binding limit); each element of the update adds its chunks up."""
    if not batch.sums:
        return {}
    jobs: list[tuple[int, GpuArray | Operand, int, int, int]] = []  # id, src, rows, n, chunks
    total = 0
    nodes = {n.id: n for c in batch.chains for m in c for n in m.inputs}
    for nid, rows in batch.sums.items():
        src = values[nodes[nid].inputs[0].id]
        if not (isinstance(src, GpuArray) or (isinstance(src, Operand) and _contiguous(src))):
            src = materialize(src)
        n = math.prod(src.shape) // rows
        chunks = min(-(-rows // _CHUNK), _MAX_CHUNKS)
        chunks = -(-rows // -(-rows // chunks))
        jobs.append((nid, src, rows, n, chunks))
        total += chunks * n
    arena = GpuArray.empty((total,), np.float32, device)
    partials: dict[int, _Partial] = {}
    offset = 0
    group: list[tuple[GpuArray | Operand, int, int, int, int]] = []
    bound: set[int] = {id(arena.buffer)}
    for nid, src, rows, n, chunks in jobs:
        buffer = Operand.of(src).array.buffer
        if group and len(bound | {id(buffer)}) > limit:
            _dispatch_sums(group, arena, device)
            group, bound = [], {id(arena.buffer)}
        group.append((src, rows, n, chunks, offset))
        bound.add(id(buffer))
        partials[nid] = _Partial(arena, offset, chunks, n)
        offset += chunks * n
    _dispatch_sums(group, arena, device)
    return partials


def _dispatch_sums(
    jobs: Sequence[tuple[GpuArray | Operand, int, int, int, int]], arena: GpuArray, device: Device
) -> None:
    """One kernel: each job's partial sums over its chunks of rows, into ``arena``."""
    slots: dict[int, int] = {id(arena.buffer): 0}
    buffers = [arena.buffer]
    for src, *_ in jobs:
        array = Operand.of(src).array
        if id(array.buffer) not in slots:
            slots[id(array.buffer)] = len(buffers)
            buffers.append(array.buffer)
    decls = ["@group(0) @binding(0) var<storage, read_write> b0: array<f32>;"]
    decls += [
        f"@group(0) @binding({k}) var<storage, read> b{k}: array<f32>;"
        for k in range(1, len(buffers))
    ]
    blocks: list[str] = []
    start = 0
    for src, rows, n, chunks, offset in jobs:
        op = Operand.of(src)
        slot = slots[id(op.array.buffer)]
        length = -(-rows // chunks)
        groups = -(-(chunks * n) // _THREADS)
        blocks.append(
            "\n".join(
                [
                    f"    if (w < {start + groups}u) {{",
                    f"        let t = (w - {start}u) * {_THREADS}u + li;",
                    f"        if (t < {chunks * n}u) {{",
                    f"            let i = t % {n}u;",
                    f"            let r0 = (t / {n}u) * {length}u;",
                    f"            let r1 = min({rows}u, r0 + {length}u);",
                    "            var acc = 0.0;",
                    "            for (var r = r0; r < r1; r++) {",
                    f"                acc += b{slot}[{op.offset}u + r * {n}u + i];",
                    "            }",
                    f"            b0[{offset}u + t] = acc;",
                    "        }",
                    "        return;",
                    "    }",
                ]
            )
        )
        start += groups
    source = "\n".join(
        [
            *decls,
            "",
            f"@compute @workgroup_size({_THREADS}, 1, 1)",
            "fn main(",
            "    @builtin(workgroup_id) wid: vec3<u32>,",
            "    @builtin(num_workgroups) nwg: vec3<u32>,",
            "    @builtin(local_invocation_index) li: u32,",
            ") {",
            "    let w = wid.x + wid.y * nwg.x;",
            *blocks,
            "}",
        ]
    )
    key = ("multi_column_sum", f"{len(jobs)} sums", (source,))
    pipe = device.pipeline(key, lambda: source, ("write",) + ("read",) * (len(buffers) - 1))
    device.dispatch(pipe, buffers, fold_groups(start, device.max_groups))


def _finish_sum(part: _Partial) -> GpuArray:
    """A column sum from its partial sums, as its own kernel (the unfused path)."""
    view = Operand(part.arena, (part.chunks, part.size), (part.size, 1), part.offset)
    return reduce_axis("sum", materialize(view), 0)
