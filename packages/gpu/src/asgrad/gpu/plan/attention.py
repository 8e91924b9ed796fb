"""Attention groups: ``softmax(chain(q @ kT)) @ v`` and its gradients, found in a
schedule and launched as the fused attention kernels (`asgrad.gpu.lowering.attention`).

`find_attention` matches, for every last-axis float32 softmax ``P``:

- forward: ``S = matmul(q, kT)``, a chain of elementwise ops of the scores' shape, each
  read once (a scale, an additive mask, ``where(keep, s, -inf)``, a bias), the
  softmax, and ``O = matmul(P, v)``: one kernel (`attention_forward`) writes O and each
  row's log-sum-exp;
- backward, when P's other readers are exactly what autograd makes of it:
  ``dV = matmul(P^T, dO)``, ``dP = matmul(dO, v^T)``, ``P * (dP - sum(dP * P))``, the
  gradient chain of the forward chain (``where(keep, g, 0)``, ``g * scale``), then
  ``dQ = matmul(dS, kT^T)`` and ``dkT = matmul(q^T, dS)``: two kernels
  (`attention_backward`) recompute P from the log-sum-exp.

Under a memory budget the schedule may recompute forward values for the backward: a
copy of q, kT or v (or of a mask) is read through its original (`_same_value`,
`_earlier`), and a softmax read only by the backward (recomputed there) is a group
without a forward output, whose backward launches the forward kernel first.

A float16 graph's attention as the mixed precision pass writes it (float16 products
around a float32 softmax whose probabilities are rounded to float16 before the product
with v) is matched by `_match_half`, forward only, and launched as
`asgrad.gpu.lowering.attention_half`'s two-pass kernel; its backward stays unfused.

Anything else falls back to the unfused nodes, decided at plan time: P read by any
other node (dropout on the attention weights, returned weights), a backward that is
not the whole pattern, more scores than `MAX_FUSED_SCORES`, head sizes over
`MAX_HEAD`, more batch axes or side operands than the kernels take, an operand that is
(a view of) a parameter (an update may write it in place), or a device with too few
storage buffers per kernel.
Scalar constants of the chains (the scale, a mask's fill) are rendered into the
kernels; other operands (masks, biases) are read through broadcast strides.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asgrad.gpu.device import Device
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.source import numpy_dtype, storage_dtype, wgsl_type
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering.attention import (
    MAX_HEAD,
    MAX_LEAD,
    MAX_SIDES,
    AttentionOperands,
    attention_backward,
    attention_forward,
    storage_buffers,
)
from asgrad.gpu.lowering.attention_half import attention_forward_half, storage_buffers_half
from asgrad.gpu.lowering.elementwise import EXPRESSION_OPS, expression_tree
from asgrad.gpu.plan.destinations import Destinations
from asgrad.gpu.plan.fusion import LAZY_VIEWS, VIEW_OPS, Value, materialize
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.scalar import Expr, arg, const, substitute
from asgrad.tensor.ir.schedule import Schedule

__all__ = [
    "MAX_CHAIN",
    "MAX_FUSED_SCORES",
    "MAX_SCORES_VARIABLE",
    "AttentionGroup",
    "AttentionPlan",
    "find_attention",
    "max_fused_scores",
]

# Elementwise ops between the product and the softmax (and in their gradient) at most.
MAX_CHAIN = 8

# Ops followed up from a recomputed copy of q, kT or v to tell it is one (`_same_value`).
MAX_COPY_DEPTH = 16

# Scores (batch x L x S) an attention may have to be fused; None: any number. The fused
# kernels save launches and the scores' memory traffic, but read workgroup memory for
# every multiply-add, where the tiled matmuls they replace reuse registers, so a large
# attention runs faster unfused: on an H200 (2026-12-02, `gpu_micro.py --profile
# transformer_large`) its step took 22.8 ms of GPU time unfused and 35.2 ms with
# `ASGRAD_GPU_ATTENTION_MAX_SCORES=none`. The transformer workload's attention has
# 2**18 scores a layer, transformer_large's 2**24.
MAX_FUSED_SCORES: int | None = 1 << 22

# Environment variable that overrides `MAX_FUSED_SCORES` when a plan is built (for an
# A/B measurement without code edits): a non-negative integer, or ``none`` for no limit.
MAX_SCORES_VARIABLE = "ASGRAD_GPU_ATTENTION_MAX_SCORES"


def max_fused_scores() -> int | None:
    """The scores an attention may have to be fused: ``ASGRAD_GPU_ATTENTION_MAX_SCORES``
    when set (``none``: any number), else `MAX_FUSED_SCORES`."""
    raw = os.environ.get(MAX_SCORES_VARIABLE, "").strip().lower()
    if not raw:
        return MAX_FUSED_SCORES
    if raw in {"none", "inf", "unlimited"}:
        return None
    try:
        value = int(raw, 0)
    except ValueError:
        value = -1
    if value < 0:
        raise GpuError(f"{MAX_SCORES_VARIABLE}={raw!r}: expected a non-negative integer or 'none'")
    return value


def _too_many_scores(shape: Sequence[int]) -> bool:
    limit = max_fused_scores()
    return limit is not None and math.prod(shape) > limit


Types = Mapping[int, TensorType]
Users = Mapping[int, list[Node]]


@dataclass
class AttentionGroup:
    """One matched attention: its operand nodes, chains, outputs and covered nodes."""

    q: Node
    kt: Node
    v: Node
    score: list[Node]  # the chain from the product to the softmax's input, in order
    sides: list[Node]  # the chains' operands besides the score (masks, biases)
    out: Node | None  # None: a recomputed softmax that only the backward reads
    lead: tuple[int, ...]
    sizes: tuple[int, int, int, int]  # L, S, E, Ev
    grad: list[Node] = field(default_factory=list)  # the scores' gradient chain
    d_out: Node | None = None
    dq: Node | None = None
    dkt: Node | None = None
    dv: Node | None = None
    half: bool = False  # a float16 graph's forward (`_match_half`): out = cast16(P) @ v
    # q, kT and v as the backward reads them: the forward's, or copies recomputed for
    # the backward under a memory budget (`_same_value`)
    backward_operands: tuple[Node, Node, Node] | None = None
    # a node read through another of the same value made before the backward launches
    # (a copy recomputed for the backward after the first gradient product)
    alias: dict[int, Node] = field(default_factory=dict)
    forward_sides: int = 0  # sides[:forward_sides] are the score chain's
    internal: frozenset[int] = frozenset()  # nodes with no value of their own
    held: dict[int, Value] = field(default_factory=dict)
    saved: tuple[GpuArray | Operand, GpuArray] | None = None  # the output and the statistics
    grads: dict[int, GpuArray | Operand] = field(default_factory=dict)  # until lowered
    finished: bool = False  # the backward launched

    @property
    def outputs(self) -> list[Node]:
        """The nodes whose values the group's kernels write."""
        return [n for n in (self.out, self.dq, self.dkt, self.dv) if n is not None]

    @property
    def external(self) -> list[Node]:
        """The nodes outside the group that its kernels read."""
        nodes = [self.q, self.kt, self.v, *self.sides, *(self.backward_operands or ())]
        nodes += [self.d_out] if self.d_out is not None else []
        found: list[Node] = []
        for node in map(self.read, nodes):
            if node not in found:
                found.append(node)
        return found

    def read(self, node: Node) -> Node:
        """The node whose value the kernels read for ``node``."""
        return self.alias.get(node.id, node)


@dataclass
class AttentionPlan:
    """The groups of a schedule, lowered as the plan reaches them (`lower`)."""

    groups: list[AttentionGroup]
    types: Types
    covered: dict[int, AttentionGroup] = field(default_factory=dict)
    readers: dict[int, list[AttentionGroup]] = field(default_factory=dict)
    # where the kernels write their outputs (`asgrad.gpu.plan.destinations`)
    destinations: Destinations | None = None

    def __post_init__(self) -> None:
        for group in self.groups:
            for node_id in group.internal | {n.id for n in group.outputs}:
                self.covered[node_id] = group
            for node in group.external:
                self.readers.setdefault(node.id, []).append(group)

    def hold(self, node: Node, value: Value) -> None:
        """Keep ``node``'s value for the groups reading it (it may be released before
        they launch)."""
        for group in self.readers.get(node.id, []):
            group.held[node.id] = value

    def lower(self, node: Node) -> Value | None:
        """A covered node's value: the forward's output, a gradient (the backward
        launched at the first of them), or None for a node inside the group."""
        group = self.covered[node.id]
        if group.half:  # the forward alone
            if node is not group.out:
                return None
            out = _forward_half(group, self.types)
            group.held.clear()
            return out
        if node is group.out:
            group.saved = _forward(group, self.types, into=self._into(group.out))
            keep: set[int] = set()  # what the backward reads
            if group.backward_operands is not None and group.d_out is not None:
                nodes = (*group.sides, *group.backward_operands, group.d_out)
                keep = {group.read(n).id for n in nodes}
            group.held = {k: v for k, v in group.held.items() if k in keep}
            return group.saved[0]
        if node in (group.dq, group.dkt, group.dv):
            if not group.finished:
                if group.saved is None:  # recomputed for the backward: the forward first
                    group.saved = _forward(group, self.types, backward=True)
                _backward(
                    group, self.types, [self._into(n) for n in (group.dq, group.dkt, group.dv)]
                )
                group.held.clear()
                group.saved = None  # their buffers serve later nodes once released
                group.finished = True
            return group.grads.pop(node.id)
        return None

    def _into(self, node: Node | None) -> Operand | None:
        return self.destinations.view(node) if self.destinations is not None else None


# -- matching ------------------------------------------------------------------------------
def find_attention(
    schedule: Schedule, users: Users, types: Types, device: Device
) -> AttentionPlan | None:
    """The attention groups of ``schedule`` (None when there is none)."""
    kept = {n.id for n in schedule.outputs} | {n.id for _, n in schedule.updates}
    position = {n.id: i for i, n in enumerate(schedule.nodes)}
    limit = device.limits.get("max-storage-buffers-per-shader-stage", 8)
    groups: list[AttentionGroup] = []
    taken: set[int] = set()
    for node in schedule.nodes:
        if node.op != "softmax":
            continue
        group = _match(node, users, types, kept, position) or _match_half(node, users, types, kept)
        if group is None:
            continue
        ids = group.internal | {n.id for n in group.outputs}
        backward = group.d_out is not None
        if group.half:
            buffers = storage_buffers_half(len(group.sides))
        else:
            buffers = storage_buffers(len(group.sides), backward)
        if buffers > limit or ids & taken:
            continue
        taken |= ids
        groups.append(group)
    return AttentionPlan(groups, types) if groups else None


def _last_swap(node: Node) -> bool:
    if node.op != "transpose":
        return False
    axes = tuple(node.attrs["axes"])
    n = len(axes)
    return n >= 2 and axes == (*range(n - 2), n - 1, n - 2)


def _only(users: Users, node: Node) -> Node | None:
    found = users.get(node.id, [])
    return found[0] if len(found) == 1 else None


def _score_typed(
    node: Node, types: Types, shape: tuple[int, ...], dtypes: tuple[str, ...] = ("float32",)
) -> bool:
    t = types[node.id]
    return t.dtype in dtypes and tuple(t.shape) == shape


def _last_axis_softmax(p: Node, users: Users, types: Types) -> tuple[tuple[int, ...], Node] | None:
    """The shape of a float32 softmax ``p`` along its last axis (of at most `MAX_LEAD`
    leading axes) and its input, when ``p`` is that input's only reader; else None."""
    shape = tuple(types[p.id].shape)
    ndim = len(shape)
    if ndim < 2 or types[p.id].dtype != "float32" or ndim - 2 > MAX_LEAD:
        return None
    if int(p.attrs["axis"]) % ndim != ndim - 1:
        return None
    x = p.inputs[0]
    if _only(users, x) is not p:
        return None
    return shape, x


def _match(
    p: Node, users: Users, types: Types, kept: set[int], position: Mapping[int, int]
) -> AttentionGroup | None:
    last = _last_axis_softmax(p, users, types)
    if last is None:
        return None
    shape, x = last
    found = _score_chain(x, users, types, shape, 0)
    if found is None:
        return None
    s, chain = found
    q, kt = s.inputs
    length, source = shape[-2], shape[-1]
    head = types[q.id].shape[-1]
    readers = users.get(p.id, [])
    outs = [u for u in readers if u.op == "matmul" and u.inputs[0] is p and u.inputs[1] is not p]
    if len(outs) > 1:
        return None
    out = outs[0] if outs else None
    others = [u for u in readers if u is not out]
    v = out.inputs[1] if out is not None else _backward_value(p, others)
    if v is None:
        return None
    value_head = types[v.id].shape[-1]
    lead = shape[:-2]
    if (
        (out is not None and tuple(types[out.id].shape) != (*lead, length, value_head))
        or max(head, value_head) > MAX_HEAD
        or min(length, source, head, value_head) == 0  # nothing to stream
        or _too_many_scores(shape)
    ):
        return None
    if any(types[n.id].dtype != "float32" for n in (q, kt, v)):
        return None
    internal = {s.id, p.id, *(n.id for n in chain)}
    sides = _sides(chain, internal, shape, types)
    if sides is None:
        return None
    group = AttentionGroup(q, kt, v, chain, sides, out, lead, (length, source, head, value_head))
    group.forward_sides = len(sides)
    if others and not _match_backward(group, p, others, users, types, shape, internal):
        return None
    if out is None and group.d_out is None:
        return None
    group.internal = frozenset(internal)
    if internal & kept or any(_from_parameter(n) for n in group.external):
        return None
    if group.d_out is not None:
        start = min(position[n.id] for n in group.outputs if n is not out)
        if out is not None and position[out.id] >= start:
            return None
        for node in (group.q, group.kt, group.v, *group.sides, *(group.backward_operands or ())):
            early = _earlier(node, users, position, start, 0)
            if early is None:
                return None
            if early is not node:
                group.alias[node.id] = early
        if any(position[n.id] >= start for n in group.external):
            return None
    return group


def _match_half(p: Node, users: Users, types: Types, kept: set[int]) -> AttentionGroup | None:
    """The forward of a float16 graph's attention, as the mixed precision pass writes it:
    ``S = matmul(q, kT)`` of float16, a chain of float16 and float32 ops (a cast to
    float32 among them: a scale and a where mask in float16, an additive float32 mask
    after the cast), the float32 softmax ``P``, its cast ``P16`` to float16 and
    ``O = matmul(P16, v)``, each read once (a backward reading ``P`` or the scores
    falls back to the unfused nodes)."""
    last = _last_axis_softmax(p, users, types)
    if last is None:
        return None
    shape, x = last
    found = _score_chain(x, users, types, shape, 0, ("float16", "float32"))
    rounded = _only(users, p)
    if found is None or rounded is None or rounded.op != "cast":
        return None
    out = _only(users, rounded)
    if out is None or out.op != "matmul" or out.inputs[0] is not rounded:
        return None
    s, chain = found
    q, kt = s.inputs
    v = out.inputs[1]
    length, source = shape[-2], shape[-1]
    head, value_head = types[q.id].shape[-1], types[v.id].shape[-1]
    lead = shape[:-2]
    if (
        any(types[n.id].dtype != "float16" for n in (s, q, kt, v, rounded, out))
        or tuple(types[out.id].shape) != (*lead, length, value_head)
        or max(head, value_head) > MAX_HEAD
        or min(length, source, head, value_head) == 0  # nothing to stream
        or _too_many_scores(shape)
    ):
        return None
    internal = {s.id, *(n.id for n in chain), p.id, rounded.id}
    sides = _sides(chain, internal, shape, types)
    if sides is None:
        return None
    sizes = (length, source, head, value_head)
    group = AttentionGroup(q, kt, v, chain, sides, out, lead, sizes, half=True)
    group.forward_sides = len(sides)
    group.internal = frozenset(internal)
    if internal & kept or any(_from_parameter(n) for n in group.external):
        return None
    return group


def _backward_value(p: Node, others: list[Node]) -> Node | None:
    """v, read by the backward's ``dO @ v^T`` (a softmax that only the backward reads,
    recomputed there under a memory budget)."""
    for node in others:
        if node.op == "mul" and p in node.inputs:
            dp = _other(node, p)
            if dp.op == "matmul" and _last_swap(dp.inputs[1]):
                return dp.inputs[1].inputs[0]
    return None


def _score_chain(
    x: Node,
    users: Users,
    types: Types,
    shape: tuple[int, ...],
    depth: int,
    dtypes: tuple[str, ...] = ("float32",),
) -> tuple[Node, list[Node]] | None:
    """The product under the softmax's input ``x`` and the chain from it to ``x`` (each
    of one of ``dtypes``)."""
    if not _score_typed(x, types, shape, dtypes):
        return None
    if x.op == "matmul":
        return x, []
    if x.op not in EXPRESSION_OPS or depth >= MAX_CHAIN:
        return None
    for inp in x.inputs:
        if _only(users, inp) is x and _score_typed(inp, types, shape, dtypes):
            found = _score_chain(inp, users, types, shape, depth + 1, dtypes)
            if found is not None:
                return found[0], [*found[1], x]
    return None


def _sides(
    chain: list[Node], internal: set[int], shape: tuple[int, ...], types: Types
) -> list[Node] | None:
    """The chain's operands besides the chained value (not scalar constants, which the
    kernel renders), or None when one is inside the group or is not of the scores' shape."""
    sides: list[Node] = []
    for node in chain:
        for inp in node.inputs:
            if inp.id in internal or _inlined_constant(inp, types) is not None:
                continue
            t = types[inp.id]
            if len(t.shape) > len(shape) or tuple(np.broadcast_shapes(t.shape, shape)) != shape:
                return None
            if inp not in sides:
                sides.append(inp)
    return sides if len(sides) <= MAX_SIDES else None


def _inlined_constant(node: Node, types: Types) -> float | None:
    """The value of a float scalar constant, rendered into the kernel."""
    if node.op != "constant" or types[node.id].dtype not in ("float16", "float32", "float64"):
        return None
    value = np.asarray(node.attrs["value"])
    return float(value.reshape(-1)[0]) if value.size == 1 else None


def _match_backward(
    group: AttentionGroup,
    p: Node,
    others: list[Node],
    users: Users,
    types: Types,
    shape: tuple[int, ...],
    internal: set[int],
) -> bool:
    """Whether P's other readers are autograd's softmax and product gradients, and the
    scores' gradient ends in the two products of q's and kT's gradients; fills
    ``group`` and ``internal``."""
    if len(others) != 3:
        return False
    pt = next((u for u in others if _last_swap(u)), None)
    muls = [u for u in others if u.op == "mul"]
    if pt is None or len(muls) != 2:
        return False
    dv = _only(users, pt)
    if dv is None or dv.op != "matmul" or dv.inputs[0] is not pt:
        return False
    d_out = dv.inputs[1]
    m1 = next((m for m in muls if _other(m, p).op == "matmul"), None)
    m2 = next((m for m in muls if _other(m, p).op == "sub"), None)
    if m1 is None or m2 is None:
        return False
    dp, d = _other(m1, p), _other(m2, p)
    vt = dp.inputs[1]
    if dp.inputs[0] is not d_out or not _last_swap(vt) or not _same_value(vt.inputs[0], group.v):
        return False
    if _only(users, vt) is not dp or sorted(u.id for u in users[dp.id]) != sorted((m1.id, d.id)):
        return False
    r = _only(users, m1)
    if r is None or r.op != "sum" or not r.attrs["keepdims"] or tuple(d.inputs) != (dp, r):
        return False
    axes = tuple(int(a) % len(shape) for a in r.attrs["axis"])
    if axes != (len(shape) - 1,) or _only(users, r) is not d or _only(users, d) is not m2:
        return False
    grad, ds = _grad_chain(m2, users, types, shape)
    if grad is None:
        return False
    readers = users.get(ds.id, [])
    dq = next((u for u in readers if u.op == "matmul" and u.inputs[0] is ds), None)
    dkt = next((u for u in readers if u.op == "matmul" and u.inputs[1] is ds), None)
    if dq is None or dkt is None or len(readers) != 2 or dq is dkt:
        return False
    ktt, qt = dq.inputs[1], dkt.inputs[0]
    if not (_last_swap(ktt) and _same_value(ktt.inputs[0], group.kt) and _only(users, ktt) is dq):
        return False
    if not (_last_swap(qt) and _same_value(qt.inputs[0], group.q) and _only(users, qt) is dkt):
        return False
    length, source, head, value_head = group.sizes
    expected = {
        dq.id: (*group.lead, length, head),
        dkt.id: (*group.lead, head, source),
        dv.id: (*group.lead, source, value_head),
    }
    if any(tuple(types[n].shape) != s for n, s in expected.items()):
        return False
    inner = {pt.id, m1.id, m2.id, dp.id, vt.id, r.id, d.id, ktt.id, qt.id}
    inner |= {n.id for n in grad}
    sides = _sides(grad, internal | inner, shape, types)
    if sides is None or d_out.id in internal | inner:
        return False
    for side in sides:
        if side not in group.sides:
            group.sides.append(side)
    if len(group.sides) > MAX_SIDES:
        return False
    internal |= inner
    group.grad, group.d_out = grad, d_out
    group.dq, group.dkt, group.dv = dq, dkt, dv
    group.backward_operands = (qt.inputs[0], ktt.inputs[0], vt.inputs[0])
    return True


def _same_value(a: Node, b: Node, depth: int = 0) -> bool:
    """``a`` is ``b``, or a copy of it: the same op and attributes on inputs that are
    (a copy recomputed for the backward under a memory budget)."""
    if a is b:
        return True
    if depth > MAX_COPY_DEPTH or a.op != b.op or a.op in ("input", "parameter", "constant"):
        return False
    if len(a.inputs) != len(b.inputs) or not _same_attrs(a, b):
        return False
    return all(_same_value(x, y, depth + 1) for x, y in zip(a.inputs, b.inputs, strict=True))


def _earlier(
    node: Node, users: Users, position: Mapping[int, int], start: int, depth: int
) -> Node | None:
    """``node``, or a node of the same value scheduled before ``start`` (the original
    of a copy recomputed later), or None."""
    if position[node.id] < start:
        return node
    original = _original(node, users, position, depth)
    return original if position[original.id] < start else None


def _original(node: Node, users: Users, position: Mapping[int, int], depth: int) -> Node:
    """The first scheduled node of ``node``'s value: the same op and attributes on the
    originals of its inputs (``node`` itself unless it is a recomputed copy)."""
    if depth > MAX_COPY_DEPTH or not node.inputs:
        return node
    ins = [_original(i, users, position, depth + 1) for i in node.inputs]
    best = node
    for other in users.get(ins[0].id, []):
        if (
            other.op == node.op
            and position[other.id] < position[best.id]
            and len(other.inputs) == len(ins)
            and all(a is b for a, b in zip(other.inputs, ins, strict=True))
            and _same_attrs(other, node)
        ):
            best = other
    return best


def _same_attrs(a: Node, b: Node) -> bool:
    try:
        return bool(a.attrs == b.attrs)
    except (TypeError, ValueError):  # attributes holding arrays: told apart, not compared
        return False


def _other(node: Node, p: Node) -> Node:
    a, b = node.inputs
    return b if a is p else a


def _grad_chain(
    start: Node, users: Users, types: Types, shape: tuple[int, ...]
) -> tuple[list[Node] | None, Node]:
    """The elementwise chain read once after ``start`` (P * (dP - D)) up to the node the
    products read (dS), and dS."""
    chain: list[Node] = []
    node = start
    while True:
        readers = users.get(node.id, [])
        if readers and all(u.op == "matmul" for u in readers):
            return chain, node
        nxt = _only(users, node)
        if nxt is None or nxt.op not in EXPRESSION_OPS or len(chain) >= MAX_CHAIN:
            return None, node
        if not _score_typed(nxt, types, shape):
            return None, node
        chain.append(nxt)
        node = nxt


def _from_parameter(node: Node) -> bool:
    """``node`` is a parameter or a view of one (an update may write its buffer)."""
    while node.op in VIEW_OPS | LAZY_VIEWS | {"transpose", "broadcast_to", "broadcast_like"}:
        node = node.inputs[0]
    return node.op == "parameter"


# -- launching ----------------------------------------------------------------------------
def _array(value: Value) -> GpuArray | Operand:
    if isinstance(value, Operand) and min(value.strides, default=0) < 0:
        return materialize(value)
    if isinstance(value, (GpuArray, Operand)):
        return value
    return materialize(value)


def _wgsl(value: GpuArray | Operand) -> str:
    return Operand.of(value).array.wgsl


def _chain_expr(chain: list[Node], group: AttentionGroup, types: Types, first: str = "f32") -> Expr:
    """The chain as one expression over arg(0) (its input, of WGSL type ``first``)
    and arg(1 + k) (side k); each op's result is of its node's type."""
    expr = arg(0)
    chained = first  # the WGSL type of expr
    for node in chain:
        args: list[Expr] = []
        in_types: list[str] = []
        for inp in node.inputs:
            value = _inlined_constant(inp, types)
            if inp in group.sides:
                k = group.sides.index(inp)
                args.append(arg(1 + k))
                in_types.append(_wgsl(_array(group.held[group.read(inp).id])))
            elif value is not None:
                args.append(const(value))
                in_types.append(wgsl_type(storage_dtype(numpy_dtype(types[inp.id].dtype))))
            else:
                args.append(expr)
                in_types.append(chained)
        tree = expression_tree(node.op, node.attrs, in_types, types[node.id].dtype)
        assert tree is not None
        expr = substitute(tree, args)
        chained = wgsl_type(storage_dtype(numpy_dtype(types[node.id].dtype)))
    return expr


def _operands(group: AttentionGroup, backward: bool) -> AttentionOperands:
    """The arrays the kernels read; the forward's sides are its chain's alone (the
    gradient chain's may be made after it)."""
    length, source, head, value_head = group.sizes
    q, kt, v = group.q, group.kt, group.v
    if backward and group.backward_operands is not None:
        q, kt, v = group.backward_operands
    sides = group.sides if backward else group.sides[: group.forward_sides]

    def array(node: Node) -> GpuArray | Operand:
        return _array(group.held[group.read(node).id])

    return AttentionOperands(
        array(q),
        array(kt),
        array(v),
        tuple(array(s) for s in sides),
        group.lead,
        length,
        source,
        head,
        value_head,
    )


def _ready(group: AttentionGroup) -> None:
    """The held values as arrays or views (a deferred one launched once)."""
    for node_id, value in group.held.items():
        group.held[node_id] = _array(value)


def _forward(
    group: AttentionGroup, types: Types, backward: bool = False, into: Operand | None = None
) -> tuple[GpuArray | Operand, GpuArray]:
    _ready(group)
    score = _chain_expr(group.score, group, types)
    return attention_forward(_operands(group, backward), score, into)


def _backward(
    group: AttentionGroup, types: Types, into: Sequence[Operand | None] = (None, None, None)
) -> None:
    assert group.saved is not None
    assert group.d_out is not None
    assert group.dq is not None
    assert group.dkt is not None
    assert group.dv is not None
    _ready(group)
    score = _chain_expr(group.score, group, types)
    grad = _chain_expr(group.grad, group, types)
    out, stats = group.saved
    d_out = _array(group.held[group.read(group.d_out).id])
    ops = _operands(group, backward=True)
    dq, dkt, dv = attention_backward(ops, score, grad, out, stats, d_out, into)
    group.grads = {group.dq.id: dq, group.dkt.id: dkt, group.dv.id: dv}


def _forward_half(group: AttentionGroup, types: Types) -> GpuArray:
    _ready(group)
    score = _chain_expr(group.score, group, types, first="f16")
    return attention_forward_half(_operands(group, backward=False), score)
