"""Planning: a schedule lowered, once per set of fed shapes, into captured dispatches.

`build_plan` reads top-down:

1. every node's type for the fed shapes;
2. fusion groups (`inlined_nodes`): the nodes inlined into their users' kernels
   rather than launched (`asgrad.gpu.plan.fusion`), and attention groups
   (`asgrad.gpu.plan.attention`): q k^T, its mask, softmax and product with v, and
   their gradients, launched as the fused attention kernels, each writing its output
   where the views reading it put it (`asgrad.gpu.plan.destinations`);
3. the multi-tensor update batch (`asgrad.gpu.plan.multi_update.find_update_batch`):
   the optimizer's update rules of every parameter, launched together in one or a few
   dispatches writing each variable in place; then the other in-place updates
   (`in_place_updates`): update rules written straight into their variable's
   buffer;
4. every node lowered in order while the device captures the dispatches
   (`lower_schedule`), each value dropped after its last use
   (`release_steps`) so that its buffer serves later nodes; then the outputs and
   the update values are written where the run reads them.

The subpackage holds the planner's parts: ``fusion`` and ``fusion_groups`` (kernels
generated for chains of elementwise ops, the nodes inlined into their users),
``fusion_rows`` (row kernels composed with the chains around them),
``update_chains``, ``multi_update`` and ``multi_sums`` (an optimizer step in few
dispatches), ``multi_finite`` (checks of many gradients in one dispatch),
``multi_copies`` (elementwise values of variables alone, a mixed-precision step's
float16 weights, in one dispatch), ``attention`` (attention as one kernel),
``destinations`` (a kernel's output written where the views reading it put it),
``capture`` (dispatches recorded once, replayed at every run), ``values`` (values
passed between nodes without a launch) and ``dispatch_kinds``. It may import
[`asgrad.tensor`][asgrad.tensor], `asgrad.gpu.errors`, `asgrad.gpu.device`,
`asgrad.gpu.lowering` and itself.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asgrad.gpu.device import Device
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.buffers import ScopedPool
from asgrad.gpu.device.copy import copy_into
from asgrad.gpu.device.readback import Outputs
from asgrad.gpu.device.source import numpy_dtype
from asgrad.gpu.device.variables import GpuVariableStore, variable_store
from asgrad.gpu.errors import GpuError
from asgrad.gpu.lowering.elementwise import EXPRESSION_OPS
from asgrad.gpu.lowering.leaf import LEAVES, Bindings, upload_constant
from asgrad.gpu.lowering.linalg import MAX_BATCH_DIMS
from asgrad.gpu.plan.attention import AttentionPlan, find_attention
from asgrad.gpu.plan.capture import Command, capturing
from asgrad.gpu.plan.destinations import Destinations, find_destinations
from asgrad.gpu.plan.fusion import (
    SHAPE_INPUTS,
    VIEW_OPS,
    Deferred,
    Value,
    lower_in_place,
    lower_node,
    materialize,
    product_into,
    product_pieces,
)
from asgrad.gpu.plan.fusion_groups import (
    MAX_RECOMPUTE,
    MAX_SCALAR_NODES,
    Types,
    Users,
    inlined_nodes,
    row_siblings,
    shared_products,
    stored_chains,
)
from asgrad.gpu.plan.multi_copies import launch_variable_copies, variable_copies
from asgrad.gpu.plan.multi_finite import Checks, check_conjunctions, none_true_checks
from asgrad.gpu.plan.multi_sums import ColumnSums
from asgrad.gpu.plan.multi_update import launch_update_batch
from asgrad.gpu.plan.update_chains import UpdateBatch, find_update_batch
from asgrad.gpu.plan.values import Partial, Summed
from asgrad.tensor.ir.graph import Node, Variable
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.runtime.progress import current

__all__ = [
    "MAX_RECOMPUTE",
    "MAX_SCALAR_NODES",
    "Plan",
    "build_plan",
    "in_place_updates",
    "inlined_nodes",
    "lower_schedule",
    "release_steps",
    "shared_products",
    "users_of",
]


@dataclass
class Plan:
    """A schedule lowered for one set of fed shapes: captured dispatches and buffers.

    The plan's buffers (``scope``) go back to the device's pool when it is collected.
    """

    device: Device
    scope: ScopedPool
    bindings: Bindings
    outputs: list[GpuArray]
    updates: list[tuple[Variable, GpuArray]]
    commands: list[Command]
    checked: bool = False  # a kernel records faults: a run arms the device's checks
    # how a launch copies the outputs into a read-back page (made at the first launch)
    launch_outputs: Outputs | None = None
    # input name -> the device array (weakly) whose contents its buffer holds now
    device_feeds: dict[str, weakref.ref[GpuArray]] = field(default_factory=dict)
    # the variable store's generation when a run last synced the variables and marked
    # the updated ones: while it is unchanged, they are all still on the device
    synced: int | None = None

    def __post_init__(self) -> None:
        weakref.finalize(self, self.scope.close)


def build_plan(
    schedule: Schedule,
    feeds: Mapping[str, np.ndarray | GpuArray],
    device: Device,
    *,
    fuse: bool = True,
) -> Plan:
    """``schedule`` lowered for the shapes of ``feeds`` (``fuse=False``: a kernel per node)."""
    store = variable_store(device)
    types = schedule.infer_types({name: v.shape for name, v in feeds.items()})
    users = users_of(schedule)
    inlined = inlined_nodes(schedule, users, types) if fuse else frozenset()
    attention = find_attention(schedule, users, types, device) if fuse else None
    if attention is not None:  # the attention kernels launch these nodes
        inlined = inlined - frozenset(attention.covered)
    batch = update_batch(schedule, users, inlined, types) if fuse else None
    destinations = None
    if fuse:  # outputs written where their readers' views put them: attention's, products'
        rules = frozenset(n.id for _, n in schedule.updates)
        roots = [n for group in attention.groups for n in group.outputs] if attention else []
        products = placed_products(schedule, types, attention, batch)
        half = frozenset(n.id for n in products)  # float16 products too (mixed precision)
        destinations = find_destinations(
            [*roots, *products], device, users, inlined, types, rules, half
        )
        if attention is not None:
            attention.destinations = destinations
    checks = _checks(schedule, types, attention, batch) if fuse else {}
    in_place = in_place_updates(schedule, users, inlined, store, batch) if fuse else {}
    copies: list[Node] = []
    if fuse:
        taken = set(in_place) | set(checks) | {n.id for f in checks.values() for n in f}
        if batch is not None:
            taken |= batch.members | set(batch.sums)
        if attention is not None:
            taken |= set(attention.covered)
        copies = variable_copies(schedule, types, inlined, taken)
    scope = ScopedPool(device.pool)
    try:
        with capturing(device, scope) as capture:
            stored = stored_chains(schedule, users, inlined, types)
            shared = shared_products(schedule, users, inlined) | stored
            members = batch.members if batch is not None else frozenset()
            written = {n.id for _, n in schedule.updates} | set(in_place) | members
            covered = set(attention.covered) if attention is not None else set()
            siblings = {  # no attention kernel hosts a sibling, nor is one
                host: found
                for host, found in row_siblings(
                    schedule, users, inlined, types, written | covered, stored
                ).items()
                if host not in covered
            }
            bindings, outputs, updates = lower_schedule(
                schedule,
                types,
                inlined,
                in_place,
                device,
                store,
                batch,
                shared,
                attention,
                siblings,
                checks,
                copies,
                destinations,
            )
    except BaseException:
        scope.close()
        raise
    return Plan(device, scope, bindings, outputs, updates, capture.commands, capture.checked)


def placed_products(
    schedule: Schedule, types: Types, attention: AttentionPlan | None, batch: UpdateBatch | None
) -> list[Node]:
    """The float32 and float16 products of matrices (batched or not) that may store their
    result through a strided destination (`asgrad.gpu.plan.destinations`): none an
    attention kernel or the update batch (split-K pieces) launches."""
    covered = set(attention.covered) if attention is not None else set()
    pieces = batch.products if batch is not None else frozenset()
    return [
        n
        for n in schedule.nodes
        if n.op == "matmul"
        and n.id not in covered
        and n.id not in pieces
        and types[n.id].dtype in ("float32", "float16")
        and all(types[i.id].dtype == types[n.id].dtype for i in n.inputs)
        and all(len(types[i.id].shape) >= 2 for i in n.inputs)
        and len(types[n.id].shape) <= 2 + MAX_BATCH_DIMS
    ]


def users_of(schedule: Schedule) -> dict[int, list[Node]]:
    """For each node id, the nodes reading it (once per read: ``x * x`` reads x twice)."""
    users: dict[int, list[Node]] = {}
    for node in schedule.nodes:
        for inp in node.inputs:
            users.setdefault(inp.id, []).append(node)
    return users


# -- in-place updates ---------------------------------------------------------------------
def update_batch(
    schedule: Schedule, users: Users, inlined: frozenset[int], types: Types
) -> UpdateBatch | None:
    """The update rules launched together as one multi-tensor batch (see
    `asgrad.gpu.plan.multi_update`), or None."""
    params = {id(n.attrs["variable"]): n for n in schedule.nodes if n.op == "parameter"}
    readers = {
        node.id: _readers(params[id(var)], users) if id(var) in params else []
        for var, node in schedule.updates
    }
    # Moving the members to the batch's step moves a reader fused into a member's
    # kernel no later than that step, so the steps before the move decide the same.
    launched_at = _launch_steps(schedule, users, inlined, {})
    kept = {n.id for n in schedule.outputs} | {n.id for _, n in schedule.updates}
    checked = {cast.id for _, cast, _ in none_true_checks(schedule.nodes, types, kept).values()}
    return find_update_batch(schedule, users, types, launched_at, readers, inlined, checked)


def in_place_updates(
    schedule: Schedule,
    users: Users,
    inlined: frozenset[int],
    store: GpuVariableStore,
    batch: UpdateBatch | None = None,
) -> dict[int, GpuArray]:
    """Update values that can be written into their variable's buffer directly.

    Safe when every other read of the variable's old value is launched before the
    update (a read fused into a later kernel counts at that kernel's position); a read
    fused into the update's own kernel reads each element before it is overwritten, by
    the same thread. The members of ``batch`` are written by the batch.
    """
    members = batch.members if batch is not None else frozenset()
    moved = dict.fromkeys(members, batch.step) if batch is not None else {}
    launched_at = _launch_steps(schedule, users, inlined, moved)
    out_ids = {n.id for n in schedule.outputs}
    params = {id(n.attrs["variable"]): n for n in schedule.nodes if n.op == "parameter"}
    result: dict[int, GpuArray] = {}
    for var, node in schedule.updates:
        if node.op not in EXPRESSION_OPS or node.id in out_ids or node.id in result:
            continue
        if node.id in members:
            continue
        if sum(1 for _, other in schedule.updates if other is node) > 1:
            continue
        param = params.get(id(var))
        readers = _readers(param, users) if param is not None else []
        at = launched_at[node.id]
        if all(r is node or launched_at[r.id] <= at for r in readers):
            result[node.id] = store.array(var)
    return result


def _launch_steps(
    schedule: Schedule,
    users: Users,
    inlined: frozenset[int],
    moved: Mapping[int, int],
) -> dict[int, int]:
    """Where the kernel that reads for each node is launched: its own step (or the
    step ``moved`` gives it), or for an inlined node the last of its users' kernels."""
    steps: dict[int, int] = {}
    for i in range(len(schedule.nodes) - 1, -1, -1):
        node = schedule.nodes[i]
        if node.id in inlined:
            steps[node.id] = max(steps[user.id] for user in users[node.id])
        else:
            steps[node.id] = moved.get(node.id, i)
    return steps


def _readers(param: Node, users: Users) -> list[Node]:
    """The nodes reading a parameter's values, directly or through views of it (the
    like input of a ``sum_to_like`` gives only a shape: no read, and no view of it)."""
    readers: list[Node] = []
    frontier = [param]
    while frontier:
        node = frontier.pop()
        for user in users.get(node.id, []):
            if not _reads_values(user, node):
                continue
            readers.append(user)
            if user.op in VIEW_OPS:
                frontier.append(user)
    return readers


def _reads_values(user: Node, node: Node) -> bool:
    """Whether ``user`` reads ``node`` at an input other than a shape-only one."""
    shape_only = SHAPE_INPUTS.get(user.op, ())
    return any(inp is node and k not in shape_only for k, inp in enumerate(user.inputs))


# -- lowering -------------------------------------------------------------------------------
def release_steps(schedule: Schedule, batch: UpdateBatch | None = None) -> dict[int, list[int]]:
    """For each step, the nodes whose values are dropped after it (their last use).

    The inputs of ``batch``'s members and sums are read when the batch launches, at
    its step.
    """
    last_use = dict(schedule.last_use)
    if batch is not None:
        for node in schedule.nodes:
            if node.id in batch.members or node.id in batch.sums:
                for inp in node.inputs:
                    last_use[inp.id] = max(last_use.get(inp.id, 0), batch.step)
    released: dict[int, list[int]] = {}
    for node_id, step in last_use.items():
        released.setdefault(step, []).append(node_id)
    return released


def lower_schedule(
    schedule: Schedule,
    types: Types,
    inlined: frozenset[int],
    in_place: Mapping[int, GpuArray],
    device: Device,
    store: GpuVariableStore,
    batch: UpdateBatch | None = None,
    shared: frozenset[int] = frozenset(),
    attention: AttentionPlan | None = None,
    siblings: Mapping[int, list[tuple[int, list[int]]]] | None = None,
    checks: Mapping[int, tuple[Node, Node, Node]] | None = None,
    copies: Sequence[Node] = (),
    destinations: Destinations | None = None,
) -> tuple[Bindings, list[GpuArray], list[tuple[Variable, GpuArray]]]:
    """Lower every node in order; returns the leaves' bindings, the outputs and the
    updates (each variable's buffer, holding its new value after a run).

    A value is dropped after its last use, so its buffer goes back to the plan's pool
    (garbage collection releases it) for the nodes after it. ``batch``'s members are
    launched together after its step; ``shared`` are the inlined matmuls read by
    more than one kernel (`shared_products`); ``attention``'s groups launch the nodes
    they cover (`asgrad.gpu.plan.attention`); ``siblings`` the elementwise kernels a
    row op's kernel computes too (`row_siblings`): their inlined inputs are lowered at
    that op's step, and their values are what it stored; ``checks`` the comparisons
    computed as flags (`asgrad.gpu.plan.multi_finite`), launched together before the
    first kernel that reads one; ``copies`` the elementwise values of variables alone
    (`asgrad.gpu.plan.multi_copies`), launched together at the first one's step;
    ``destinations`` where products read only through views store their result
    (`asgrad.gpu.plan.destinations`, `placed_products`).
    """
    bindings = Bindings()
    copied = {n.id for n in copies}
    ready: dict[int, GpuArray] = {}  # launched with the first of ``copies``
    conjunctions = check_conjunctions(schedule.nodes, set(checks or {}), inlined)
    flags = Checks.of(checks or {}, device, len(conjunctions))
    casts = {cast.id for _, cast, _ in (checks or {}).values()}
    compared = set(checks or {})
    passed = {total.id for _, _, total in (checks or {}).values()}
    flush_before = _check_readers(schedule, inlined, checks or {}, siblings or {})
    released = release_steps(schedule, batch)
    members = batch.members if batch is not None else frozenset()
    products = batch.products - inlined if batch is not None else frozenset()
    sums = ColumnSums(device)  # the batch's column sums, launched together
    early: dict[int, GpuArray] = {}  # computed by an earlier row kernel (siblings)
    values: dict[int, Value] = {}
    nodes = {n.id: n for n in schedule.nodes}

    def lower_at(n: Node) -> Value:
        ins = [values[i.id] for i in n.inputs]
        return _lower_one(n, ins, types, inlined, in_place, device, bindings, shared)

    progress = current()
    progress.stage("GPU: lowering nodes", len(schedule.nodes))
    # A leaf's buffer is never one a kernel of the plan writes: feeds are plan-owned
    # (leaf.plan_owned) and constants come from the device's own pool.
    for i, node in enumerate(schedule.nodes):
        progress.advance()
        out_type = types[node.id]
        if flags is not None and node.id in flush_before:
            flags.launch()
        if node.id in copied and not ready and copies:
            ready = launch_variable_copies(copies, types, store, device)
            copies = ()
        if node.id in ready:
            values[node.id] = ready.pop(node.id)
        elif flags is not None and node.id in casts:
            values[node.id] = flags.add(values[node.inputs[0].id])
        elif flags is not None and (node.id in passed or node.id in compared):
            values[node.id] = values[node.inputs[0].id]  # the check's flag, passed on
        elif (
            flags is not None
            and node.id in conjunctions
            and (flag := flags.all_of(_flag_leaves([values[i.id] for i in node.inputs])))
        ):
            values[node.id] = flag  # the & of checks: a flag of their kernel's
        elif batch is not None and node.id in members:
            var = batch.variables.get(node.id)  # None: an interior rule of the batch
            if var is not None:
                values[node.id] = store.array(var)  # the batch writes it
        elif batch is not None and node.id in batch.sums:
            src = values[node.inputs[0].id]  # summed by the batch (and the checks)
            values[node.id] = sums.add(src, batch.sums[node.id], out_type)
        elif node.id in early:
            values[node.id] = early.pop(node.id)
        elif node.id in values:
            pass  # an inlined input of a sibling kernel, lowered at its row op's step
        elif node.op in LEAVES:
            values[node.id] = bindings.bind(node, out_type, device, store)
        elif attention is not None and node.id in attention.covered:
            with device.checks.lowering(node.op, node.location):
                covered = attention.lower(node)
            if covered is not None:
                values[node.id] = covered
        else:
            ins = [values[n.id] for n in node.inputs]
            try:
                with device.checks.lowering(node.op, node.location):
                    split = product_pieces(node, ins, out_type) if node.id in products else None
                    found: list[tuple[int, Deferred]] = []
                    for sibling, closure in (siblings or {}).get(node.id, []):
                        todo = [n for n in closure if n not in values]
                        made = set(values) | set(todo)
                        reads = {i.id for n in (*todo, sibling) for i in nodes[n].inputs}
                        if not reads <= made:
                            continue  # reads a value already released: lowered at its step
                        for nid in closure:  # made before this step: lowered now
                            if nid not in values:
                                values[nid] = lower_at(nodes[nid])
                        t = nodes[sibling]
                        d = lower_node(t, [values[x.id] for x in t.inputs], types[t.id], True)
                        if isinstance(d, Deferred):
                            found.append((sibling, d))
                    into = None
                    placeable = node.op == "matmul" and node.id not in in_place
                    if split is None and destinations is not None and placeable:
                        into = destinations.view(node)
                    if into is not None:  # stored where the views reading it put it
                        values[node.id] = product_into(ins, into)
                    elif split is None:
                        values[node.id] = _lower_one(
                            node,
                            ins,
                            types,
                            inlined,
                            in_place,
                            device,
                            bindings,
                            shared,
                            [d for _, d in found],
                        )
                        early.update({t: d.array for t, d in found if d.array is not None})
                    elif split[1] == 1:
                        values[node.id] = split[0]
                    else:  # the batch adds the pieces up (and the checks)
                        shape = tuple(out_type.shape)
                        part = Partial(split[0], 0, split[1], math.prod(shape), shape)
                        values[node.id] = Summed(out_type, part)
            except GpuError as exc:
                raise type(exc)(f"{node.op} (made at {node.location}): {exc}") from exc
        if attention is not None and node.id in values:
            attention.hold(node, values[node.id])
        if batch is not None and i == batch.step:
            if flags is not None:
                flags.launch()
            targets = {m: store.array(v) for m, v in batch.variables.items()}
            launch_update_batch(batch, values, targets, device)
        for dead in released.get(i, []):
            values.pop(dead, None)
    if flags is not None:
        flags.launch()
    outputs = [materialize(values[n.id]) for n in schedule.outputs]
    updates: list[tuple[Variable, GpuArray]] = []
    for var, node in schedule.updates:
        target = store.array(var)
        new_value = materialize(values[node.id])
        if new_value.buffer is not target.buffer:
            copy_into(new_value, target)
        updates.append((var, target))
    return bindings, outputs, updates


def _checks(
    schedule: Schedule,
    types: Types,
    attention: AttentionPlan | None,
    batch: UpdateBatch | None,
) -> dict[int, tuple[Node, Node, Node]]:
    """The comparisons a plan computes as flags (`none_true_checks`), none of whose
    nodes another kernel group (attention, an update batch) launches."""
    others: set[int] = set(attention.covered) if attention is not None else set()
    kept = {n.id for n in schedule.outputs} | {n.id for _, n in schedule.updates}
    if batch is not None:
        others |= set(batch.members) | set(batch.sums)
    return {
        nid: found
        for nid, found in none_true_checks(schedule.nodes, types, kept).items()
        if not others & {nid, *(n.id for n in found)}
    }


def _flag_leaves(values: Sequence[Value]) -> list[Value]:
    """The leaves of ``values`` through deferred expressions (an ``&`` of checks: their
    flags)."""
    leaves: list[Value] = []
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, Deferred) and v.array is None:
            stack.extend(v.inputs)
        else:
            leaves.append(v)
    return leaves


def _check_readers(
    schedule: Schedule,
    inlined: frozenset[int],
    checks: Mapping[int, object],
    siblings: Mapping[int, list[tuple[int, list[int]]]],
) -> set[int]:
    """The launched nodes that read a check, directly or through inlined nodes, and the
    row kernels computing a sibling that does (`row_siblings`): the pending checks are
    launched before each of them."""
    reach: set[int] = set(checks)
    readers: set[int] = set()
    nodes = {n.id: n for n in schedule.nodes}
    for node in schedule.nodes:
        if not any(i.id in reach for i in node.inputs):
            continue
        if node.id in inlined:
            reach.add(node.id)
        else:
            readers.add(node.id)
    for host, found in siblings.items():
        for sibling, closure in found:
            if any(i.id in reach for n in (sibling, *closure) for i in nodes[n].inputs):
                readers.add(host)
    return readers


def _lower_one(
    node: Node,
    ins: list[Value],
    types: Types,
    inlined: frozenset[int],
    in_place: Mapping[int, GpuArray],
    device: Device,
    bindings: Bindings,
    shared: frozenset[int],
    siblings: Sequence[Deferred] = (),
) -> Value:
    """The value of one computing node: written in place, a constant, or lowered
    (``siblings``: kernels its row kernel may compute too, `row_siblings`)."""
    out_type = types[node.id]
    target = in_place.get(node.id)
    if target is not None:
        return lower_in_place(node, ins, out_type, target)
    if node.op == "size_ratio":  # a constant once shapes are known
        a, b = (types[n.id].shape for n in node.inputs)
        ratio = np.asarray(math.prod(a) / max(math.prod(b), 1))
        value = upload_constant(device, ratio, numpy_dtype(out_type.dtype))
        bindings.constants.append(value)
        return value
    in_shape = tuple(types[node.inputs[0].id].shape) if node.inputs else ()
    inline = node.id in inlined
    return lower_node(node, ins, out_type, inline, in_shape, node.id in shared, siblings)
