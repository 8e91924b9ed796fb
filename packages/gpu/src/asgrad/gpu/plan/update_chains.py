"""Update chains: the optimizer's update rules a plan launches as one batch.

`find_update_batch` finds them (`asgrad.gpu.plan.multi_update` launches them):
each chain is the update rules of one parameter that read one another's new values,
and the column sums (bias gradients) only a chain reads are summed with the batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from asgrad.gpu.device.source import numpy_dtype, wgsl_type
from asgrad.gpu.lowering.elementwise import (
    EXPRESSION_OPS,
)
from asgrad.gpu.plan.fusion import VIEW_OPS
from asgrad.gpu.plan.values import sums_batch
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node, Variable
from asgrad.tensor.ir.schedule import Schedule

__all__ = ["UpdateBatch", "find_update_batch"]


@dataclass
class UpdateBatch:
    """The update chains launched together after schedule step ``step``."""

    chains: list[list[Node]]  # each in schedule order
    # member node id -> the variable it updates (interior rules, computed in the batch
    # and read by later rules of their chain, have none)
    variables: dict[int, Variable]
    step: int
    members: frozenset[int] = field(default_factory=frozenset)
    # column sums (a bias's gradient) read only by one chain: id -> rows summed
    sums: dict[int, int] = field(default_factory=dict)
    # products (a weight's gradient) read only by one chain: launched with K split into
    # partial products that the chain's update adds up (no column reduction of their own)
    products: frozenset[int] = field(default_factory=frozenset)


def find_update_batch(
    schedule: Schedule,
    users: Mapping[int, list[Node]],
    types: Mapping[int, TensorType],
    launch_step: Mapping[int, int],
    readers: Mapping[int, list[Node]],
    inlined: Set[int] = frozenset(),
    checked: Set[int] = frozenset(),
) -> UpdateBatch | None:
    """The update chains a plan can launch together, or None.

    A member is a float32 (or float16) elementwise update value that nothing but other
    members reads, or an *interior rule*: a float elementwise value that is no update,
    reads a member (or another interior rule) and is read only by members of its element
    count (the ``new`` of a gated update ``where(skip, old, new)``); the batch computes
    an interior rule without storing it. A chain is a connected set of members of one
    element count; a scalar chain whose old values another chain's rules read through
    elementwise ops stays out. ``readers``
    gives, for each member, the nodes reading its variable's old value (through views
    too); each must be launched by the batch's step (``launch_step``, where inlined
    nodes count at their users' kernels and members at the batch's step) or be a
    member of the same chain reading the value directly.

    The batch also adds up the column sums (a bias's gradient) and the products whose
    K is split (a weight's) that only one chain reads, directly or through ``inlined``
    elementwise nodes of their size, whose other readers may be the checks of the
    gradients (``checked``: the cast nodes of `asgrad.gpu.plan.multi_finite`'s checks,
    which read each sum from its partial sums as the batch does).
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
        and _storage(types[node.id]) in ("f32", "f16")
    }
    if len({id(v) for v in variables.values()}) != len(variables):
        return None
    # Interior rules: float32 elementwise values that are no update, read only by
    # members of their own element count (a gated update's new value, where(skip, old,
    # new), reads the rule that computes ``new``); the batch computes them without
    # storing them. (A per-step scalar read by every parameter's rule is none.)
    update_ids = set(counts)
    interior = {
        n.id
        for n in schedule.nodes
        if n.op in EXPRESSION_OPS
        and n.id not in update_ids
        and n.id not in out_ids
        and _is_f32(types[n.id])
        and all(_size(types[u.id]) == _size(types[n.id]) for u in users.get(n.id, []))
    }
    changed = True
    while changed:  # members and interior rules read only by members and interior rules
        changed = False
        for nid in [*variables, *interior]:
            if any(u.id not in variables and u.id not in interior for u in users.get(nid, [])):
                variables.pop(nid, None)
                interior.discard(nid)
                changed = True
    if not variables:
        return None
    # only the interior rules that read a member or another (they need the batch)
    inside = set(variables)
    for n in schedule.nodes:
        size = _size(types[n.id])
        ins = [i for i in n.inputs if i.id in inside]
        if n.id in interior and ins and all(_size(types[i.id]) == size for i in ins):
            inside.add(n.id)
    index = {n.id: i for i, n in enumerate(schedule.nodes)}
    chains = _chains([n for n in schedule.nodes if n.id in inside], inside)
    chains = [c for c in chains if any(n.id in variables for n in c)]
    chains = [c for c in chains if len({_size(types[n.id]) for n in c}) == 1]
    if not chains:
        return None
    step = max(index[n.id] for c in chains for n in c)
    chain_of = {n.id: k for k, c in enumerate(chains) for n in c}
    kept = []
    for k, chain in enumerate(chains):
        # A scalar chain whose old values another chain's rules read through elementwise
        # ops (a loss scale the gradients are unscaled by, a step counter the per-step
        # scalars read) stays out: in the batch it would make every such rule launch a
        # kernel of its own first, to read the old value before the dispatch writes it.
        ok = not (
            _size(types[chain[0].id]) == 1
            and _feeds_other_chains(chain, k, chain_of, readers, users)
        )
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
    launched = out_ids | {n.id for _, n in schedule.updates}
    reads = _Reads(users, types, frozenset(inlined), frozenset(checked), frozenset(launched))
    sums = _column_sums(kept, reads)
    products = _products(kept, reads)
    written = {i: variables[i] for i in members if i in variables}
    return UpdateBatch(kept, written, step, members, sums, products)


def _feeds_other_chains(
    chain: list[Node],
    k: int,
    chain_of: Mapping[int, int],
    readers: Mapping[int, list[Node]],
    users: Mapping[int, list[Node]],
) -> bool:
    """Whether a reader of ``chain``'s old values reaches a rule of another chain
    through elementwise ops only (ops a kernel fuses into the rule reading them)."""
    frontier = [r for node in chain for r in readers.get(node.id, []) if chain_of.get(r.id) != k]
    seen: set[int] = set()
    while frontier:
        node = frontier.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        if chain_of.get(node.id, k) != k:
            return True
        if node.op in EXPRESSION_OPS or node.op in VIEW_OPS:
            frontier += users.get(node.id, [])
    return False


@dataclass(frozen=True)
class _Reads:
    """What a batch may sum for its chains: the graph's readers and types, the inlined
    nodes, the checks' cast nodes and the nodes launched as values of their own."""

    users: Mapping[int, list[Node]]
    types: Mapping[int, TensorType]
    inlined: frozenset[int]
    checked: frozenset[int]
    launched: frozenset[int]

    def sources(self, chain: list[Node]) -> list[Node]:
        """The values the chain's members read, directly or through inlined elementwise
        nodes of the chain's size, in the order found."""
        ids = {m.id for m in chain}
        size = _size(self.types[chain[0].id])
        found: list[Node] = []
        seen: set[int] = set()
        stack = [i for m in chain for i in reversed(m.inputs) if i.id not in ids]
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            if self._through(node, size):
                stack += [i for i in reversed(node.inputs) if _size(self.types[i.id]) == size]
            else:
                found.append(node)
        return found

    def only_by(self, node: Node, chain: list[Node]) -> bool:
        """Whether every reader of ``node`` is a member of ``chain``, a check, or an
        inlined elementwise node of its size whose readers are too."""
        ids = {m.id for m in chain}
        size = _size(self.types[node.id])
        frontier, seen = [node], {node.id}
        while frontier:
            for user in self.users.get(frontier.pop().id, []):
                if user.id in ids or user.id in self.checked or user.id in seen:
                    continue
                if not self._through(user, size):
                    return False
                seen.add(user.id)
                frontier.append(user)
        return True

    def _through(self, node: Node, size: int) -> bool:
        return (
            node.op in EXPRESSION_OPS
            and node.id in self.inlined
            and node.id not in self.launched
            and _size(self.types[node.id]) == size
        )


def _column_sums(chains: list[list[Node]], reads: _Reads) -> dict[int, int]:
    """The sums over leading axes (bias gradients) that only one chain reads (and the
    gradients' checks): the batch sums them, instead of a reduction kernel each.
    id -> the rows each element sums."""
    sums: dict[int, int] = {}
    types = reads.types
    for chain in chains:
        size = _size(types[chain[0].id])
        for node in reads.sources(chain):
            if node.id in reads.launched or node.id in sums:
                continue
            if _size(types[node.id]) != size:
                continue  # read broadcast: not one sum per element of the update
            if not reads.only_by(node, chain):
                continue
            rows = _leading_sum(node, types)
            if rows is None or _source(node.inputs[0]).op in _LEAVES:
                continue
            src = node.inputs[0]
            if src.op == "matmul" and sums_batch(src, node, types):
                continue  # one 2-D matmul already (fusion.Product)
            sums[node.id] = rows
    return sums


def _products(chains: list[list[Node]], reads: _Reads) -> frozenset[int]:
    """The float32 (or float16) products of matrices (a weight's gradient: a matmul, or
    a batched one summed over its batch) that only one chain reads (and the gradients'
    checks), each element once."""
    found: set[int] = set()
    types = reads.types
    for chain in chains:
        size = _size(types[chain[0].id])
        for node in reads.sources(chain):
            if node.id in reads.launched or _size(types[node.id]) != size:
                continue
            if _storage(types[node.id]) not in ("f32", "f16"):
                continue
            if not reads.only_by(node, chain):
                continue
            src = node.inputs[0] if node.inputs else node
            if (node.op == "matmul" and _matrices(node, types)) or (
                src.op == "matmul" and sums_batch(src, node, types)
            ):
                found.add(node.id)
    return frozenset(found)


def _matrices(node: Node, types: Mapping[int, TensorType]) -> bool:
    return all(len(types[i.id].shape) == 2 for i in node.inputs)


_LEAVES = frozenset({"input", "parameter", "constant"})


def _source(node: Node) -> Node:
    """``node``, or the node it is a view of (through reshapes)."""
    while node.op in VIEW_OPS and node.inputs:
        node = node.inputs[0]
    return node


def _leading_sum(node: Node, types: Mapping[int, TensorType]) -> int | None:
    """The rows summed when ``node`` sums its input over leading axes only (a float32
    or float16 sum: the batch adds float32 partial sums and rounds a float16 one once,
    as the float16 sum does)."""
    if node.op not in ("sum", "sum_to_like") or _storage(types[node.id]) not in ("f32", "f16"):
        return None
    src = tuple(types[node.inputs[0].id].shape)
    out = tuple(types[node.id].shape)
    while out and out[0] == 1:
        out = out[1:]
    lead = len(src) - len(out)
    if lead < 1 or src[lead:] != out:
        return None
    if node.op == "sum":
        axes = sorted(a % len(src) for a in node.attrs["axis"])
        if axes != list(range(lead)):
            return None
    rows = math.prod(src[:lead])
    return rows if rows > 1 else None


def _is_f32(t: TensorType) -> bool:
    """float32 storage (an interior rule's)."""
    return _storage(t) == "f32"


def _storage(t: TensorType) -> str | None:
    try:
        return wgsl_type(numpy_dtype(t.dtype))
    except Exception:  # a dtype the GPU cannot hold
        return None


def _size(t: TensorType) -> int:
    return math.prod(t.shape)


def _chains(nodes: list[Node], members: set[int]) -> list[list[Node]]:
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
