"""Fusion groups: which nodes a plan inlines into their users' kernels.

`inlined_nodes` decides, from the types and the users of every node, which
nodes are not launched: elementwise chains, views read through strides, transposes
read by matmuls, batched matmuls summed over their batch axes, the pieces of a sum of
scatter_slices, row programs and trailing reductions taken into their reader's row
kernel and the chains a row kernel reads (see `asgrad.gpu.plan.fusion`,
`asgrad.gpu.plan.fusion_rows` and `asgrad.gpu.plan.values`). `row_siblings` picks
the elementwise kernels an earlier row kernel computes too.
"""

from __future__ import annotations

from collections.abc import Mapping

from asgrad.gpu.lowering.elementwise import (
    EXPRESSION_OPS,
)
from asgrad.gpu.plan.fusion import (
    INLINE_OPS,
    LAZY_VIEWS,
    LIKE_OPS,
    ROW_OPS,
    SHAPE_INPUTS,
    VIEW_OPS,
)
from asgrad.gpu.plan.fusion_rows import ROW_REDUCTIONS, reduction_axes
from asgrad.gpu.plan.values import sums_batch
from asgrad.tensor import TensorType, get_op
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.schedule import Schedule

__all__ = [
    "MAX_EPILOGUE_SEARCH",
    "MAX_RECOMPUTE",
    "MAX_SCALAR_NODES",
    "Types",
    "Users",
    "inlined_nodes",
    "row_siblings",
    "shared_products",
    "stored_chains",
]


# Nodes searched from a matmul for a kernel that can be its epilogue (`_epilogue_of`):
# the search stays linear in the graph.
MAX_EPILOGUE_SEARCH = 32


# An elementwise value read by up to this many elementwise users is recomputed in each.
MAX_RECOMPUTE = 4


# A scalar read by more is recomputed in each if its expression holds at most this many
# nodes (an optimizer's per-step factors), else launched once (a global gradient norm).
MAX_SCALAR_NODES = 8


Users = Mapping[int, list[Node]]


Types = Mapping[int, TensorType]


# -- fusion groups --------------------------------------------------------------------------
def inlined_nodes(schedule: Schedule, users: Users, types: Types) -> frozenset[int]:
    """The nodes inlined into their users rather than launched.

    Every user must be elementwise (it broadcasts the value, so any shape of it
    broadcasts to the user's), or a view or broadcast that is itself inlined; an
    elementwise value with several users is recomputed in each (up to
    `MAX_RECOMPUTE`, any number for a scalar), which costs arithmetic, not a
    launch. A transpose read only by matmuls (or by transposes that are) becomes
    strides; a batched matmul summed over its batch axes (a weight's gradient through a
    3-D input) becomes one 2-D matmul; a matmul read only by a chain of elementwise
    ops of its shape is launched by the chain's kernel, which becomes its epilogue; a
    row program (or a trailing sum or max) read by one elementwise node of its shape
    runs as that node's kernel, and an elementwise node whose first reader is a row
    kernel is computed in it (`asgrad.gpu.plan.fusion_rows`).
    Outputs and update values are always launched.
    """
    updates = {n.id for _, n in schedule.updates}
    kept = {n.id for n in schedule.outputs} | updates
    inlined: set[int] = set()
    scatters = _scatter_sums(schedule, users)
    for node in reversed(schedule.nodes):  # a node's users come after it
        following = users.get(node.id, [])
        if node.id in scatters and node.id not in kept:
            inlined.add(node.id)  # written into the sum's buffer (fusion.Scattered)
        elif node.id not in kept and following and _inlinable(node, following, inlined, types):
            inlined.add(node.id)
        elif node.id not in kept and _epilogue_of(node, users, inlined, types, updates):
            inlined.add(node.id)  # stored through its reader's expression (fusion.emit)
        elif node.id not in kept and _rows_epilogue(node, following, types, users, inlined):
            inlined.add(node.id)  # its reader's expression is its output (fusion_rows)
        elif node.id not in kept and _shared_rows(node, following, types):
            inlined.add(node.id)  # the first reader's kernel stores it for the others
    for node in schedule.nodes:  # a widely read scalar is recomputed only if it is short
        if (
            node.id in inlined
            and node.op in EXPRESSION_OPS
            and len(users[node.id]) > MAX_RECOMPUTE
            and _inlined_size(node, inlined) > MAX_SCALAR_NODES
        ):
            inlined.discard(node.id)
    for node in schedule.nodes:  # chains a row kernel reads (and stores for the others)
        if node.id not in kept and node.id not in inlined and _prologue(node, users, types):
            inlined.add(node.id)
    return frozenset(inlined)


def _row_program_inputs(node: Node, types: Types) -> tuple[str, ...] | None:
    """The layouts of the inputs of a row op (`fusion.ROW_OPS`) of float32, or None."""
    if node.op not in ROW_OPS or types[node.id].dtype != "float32":
        return None
    rows = get_op(node.op).rows
    if rows is None:
        return None
    ndim = len(types[node.inputs[0].id].shape)
    return rows(ndim, len(node.inputs), **node.attrs).inputs


def _row_reduction(node: Node, types: Types) -> bool:
    """A float32 reduction a row kernel computes (`fusion_rows.reduction_axes`)."""
    if types[node.id].dtype != "float32" or not node.inputs:
        return False
    shape = tuple(types[node.inputs[0].id].shape)
    return reduction_axes(node.op, node.attrs, shape) is not None


# Views a reduction's value passes through to an elementwise reader of its elements.
_ROW_VIEWS = frozenset({"reshape", "expand_dims", "squeeze", "broadcast_to", "broadcast_like"})


def _rows_epilogue(
    node: Node, following: list[Node], types: Types, users: Users, inlined: set[int]
) -> bool:
    """A row op read by one elementwise node of its shape, or a reduction read (through
    size-1 views and broadcasts) by one of its input's shape: that node's kernel runs
    as the row kernel's output expression (`asgrad.gpu.plan.fusion_rows`)."""
    if _row_program_inputs(node, types) is not None:
        shape = tuple(types[node.id].shape)
    elif _row_reduction(node, types):
        shape = tuple(types[node.inputs[0].id].shape)
        own = tuple(types[node.id].shape)
        reader = following[0] if len(following) == 1 else None
        while (  # through inlined elementwise readers of its shape, one each
            reader is not None
            and reader.id in inlined
            and reader.op in EXPRESSION_OPS
            and tuple(types[reader.id].shape) == own
            and len(users.get(reader.id, [])) == 1
        ):
            reader = users[reader.id][0]
        if reader is not None and reader.id not in inlined and tuple(types[reader.id].shape) == own:
            shape = own  # a launched reader of its own shape: written once per row
            following = [reader]
        while len(following) == 1 and following[0].op in _ROW_VIEWS:
            following = users.get(following[0].id, [])
    else:
        return False
    return (
        len(following) == 1
        and following[0].op in EXPRESSION_OPS
        and tuple(types[following[0].id].shape) == shape
    )


def _shared_rows(node: Node, following: list[Node], types: Types) -> bool:
    """A row op read by several elementwise nodes of its shape (a norm's gradient read
    cast to float16 and by a sum): the kernel of the first whose output expression
    reads it stores it beside its output, for the others (`stored_chains`)."""
    if _row_program_inputs(node, types) is None or len(following) < 2:
        return False
    shape = tuple(types[node.id].shape)
    return all(
        u.op in EXPRESSION_OPS and not _shape_only(u, node) and tuple(types[u.id].shape) == shape
        for u in following
    )


def _prologue(node: Node, users: Users, types: Types) -> bool:
    """A float32 elementwise node whose first reader is a row op of its shape reading
    it at the element (layer norm of a residual sum): the row kernel computes it as it
    reads the row, and stores it for the other readers (`stored_chains`)."""
    if node.op not in EXPRESSION_OPS or types[node.id].dtype != "float32":
        return False
    following = users.get(node.id, [])
    if not following:
        return False
    first = following[0]
    if _row_reduction(first, types):
        return True  # its only input, of its elements' shape
    layouts = _row_program_inputs(first, types)
    if layouts is None or tuple(types[first.id].shape) != tuple(types[node.id].shape):
        return False
    return all(layouts[k] == "element" for k, i in enumerate(first.inputs) if i.id == node.id)


def stored_chains(
    schedule: Schedule, users: Users, inlined: frozenset[int], types: Types
) -> frozenset[int]:
    """The inlined elementwise nodes that a row kernel stores for their other readers:
    those whose first reader is a row op and that other nodes read too, and those
    read by several nodes whose expression holds an inlined row program (a layer
    norm's input gradient added to the residual's gradient, read both cast to float16
    by a product and by the next sum): the row kernel whose output expression
    computes one first stores it, rather than each reader repeating the program's
    reductions (`asgrad.gpu.plan.fusion_rows`). A cast of a launched array alone (a
    float16 product widened) is never stored: reading it widened costs nothing."""
    stored: set[int] = set()
    for node in schedule.nodes:
        following = users.get(node.id)
        if node.id in inlined and following and _shared_rows(node, following, types):
            stored.add(node.id)  # a row program read by several kernels
            continue
        if node.id not in inlined or node.op not in EXPRESSION_OPS or not following:
            continue
        if node.op == "cast" and node.inputs[0].id not in inlined:
            continue
        if not any(u is not following[0] for u in following):
            continue
        first = following[0]
        if first.op in ROW_OPS or first.op in ROW_REDUCTIONS or _holds_rows(node, inlined, types):
            stored.add(node.id)
    return frozenset(stored)


def _holds_rows(node: Node, inlined: frozenset[int], types: Types) -> bool:
    """Whether ``node``'s expression (through its inlined elementwise inputs) reads an
    inlined row program (`fusion.ROW_OPS`: a norm, a softmax, their gradients) of its
    own shape."""
    shape = tuple(types[node.id].shape)
    stack, seen = list(node.inputs), {node.id}
    while stack and len(seen) <= MAX_EPILOGUE_SEARCH:
        current = stack.pop()
        if current.id in seen or current.id not in inlined:
            continue
        seen.add(current.id)
        if current.op in ROW_OPS and tuple(types[current.id].shape) == shape:
            return True
        if current.op in EXPRESSION_OPS:
            stack.extend(current.inputs)
    return False


def _scatter_sums(schedule: Schedule, users: Users) -> set[int]:
    """The scatter_slices summed by a tree of adds (a slice's gradient: attention's q,
    k and v of one qkv): the sum writes each piece into its region, so no zeros are
    filled and added where the pieces cover it."""

    # the scatter_slices under each single-use node that is one, or a tree of adds of
    # them (None otherwise); in schedule order, so inputs come first (no recursion: a
    # chain of ten thousand adds is fine)
    leaves: dict[int, list[Node] | None] = {}
    result: set[int] = set()
    for node in schedule.nodes:
        parts = [leaves.get(i.id) for i in node.inputs] if node.op == "add" else []
        whole = parts and all(p is not None for p in parts)
        if whole:
            result |= {n.id for p in parts if p is not None for n in p}
        if len(users.get(node.id, [])) != 1:
            leaves[node.id] = None
        elif node.op == "scatter_slice":
            leaves[node.id] = [node]
        else:
            leaves[node.id] = [n for p in parts if p is not None for n in p] if whole else None
    return result


def _inlined_size(node: Node, inlined: set[int]) -> int:
    """How many nodes the expression of ``node`` holds: it and its inlined inputs."""
    seen: set[int] = set()
    frontier = [node]
    while frontier:
        current = frontier.pop()
        if current.id not in seen:
            seen.add(current.id)
            frontier += [i for i in current.inputs if i.id in inlined]
    return len(seen)


def _inlinable(node: Node, following: list[Node], inlined: set[int], types: Types) -> bool:
    if node.op in EXPRESSION_OPS:  # a reader of its shape alone never computes it
        following = [u for u in following if not _shape_only(u, node)]
    if node.op == "matmul" and len(following) == 1 and sums_batch(node, following[0], types):
        return True  # one 2-D product over the batch axes folded into K
    if (
        node.op == "transpose"
        and _keeps_last_axis(node)
        and all(
            u.op == "matmul"
            or (u.op in LAZY_VIEWS | {"transpose"} and u.id in inlined)
            or _reads_shape(u, node)
            for u in following
        )
    ):
        return True  # strides of every matmul reading it (a view costs no launch)
    if node.op in LAZY_VIEWS and all(_reads_view(u, node, inlined) for u in following):
        return True  # strides of its readers: a slice, a reshape numpy does without copy
    if node.op in EXPRESSION_OPS:
        # a scalar (an optimizer's per-step factor) is cheap to recompute in any number
        allowed = len(following) <= MAX_RECOMPUTE or types[node.id].shape == ()
    elif node.op in INLINE_OPS or _passes_through(node, types):
        allowed = node.op != "transpose" or len(following) == 1
    else:
        return False
    return allowed and all(
        u.op in EXPRESSION_OPS
        or ((u.op in INLINE_OPS or _passes_through(u, types)) and u.id in inlined)
        for u in following
    )


def _epilogue_of(
    node: Node, users: Users, inlined: set[int], types: Types, updates: set[int]
) -> bool:
    """A float32 (or float16) matmul of matrices that a launched elementwise kernel of
    its shape and dtype reads, directly or through inlined elementwise ops of its shape: that
    kernel can be the product's epilogue (the first such kernel launched stores the
    product through its expression, and for the other readers when it is shared).
    An update rule is no such kernel: it writes its variable in place, or with the
    other parameters' rules (a weight's gradient is launched where it is made)."""
    t = types[node.id]
    if node.op != "matmul" or t.dtype not in ("float32", "float16") or len(t.shape) < 2:
        return False
    if any(len(types[i.id].shape) < 2 for i in node.inputs):
        return False
    frontier, seen = [node], {node.id}
    while frontier and len(seen) <= MAX_EPILOGUE_SEARCH:
        for user in users.get(frontier.pop().id, []):
            if user.id in seen:
                continue
            seen.add(user.id)
            if user.op not in EXPRESSION_OPS or tuple(types[user.id].shape) != tuple(t.shape):
                continue
            if user.id not in inlined:
                if types[user.id].dtype == t.dtype and user.id not in updates:
                    return True
            else:
                frontier.append(user)
    return False


def shared_products(schedule: Schedule, users: Users, inlined: frozenset[int]) -> frozenset[int]:
    """The inlined matmuls read by more than one kernel (not a chain of single
    readers ending in one launched node): the kernel that stores one through its
    epilogue stores the product too, for the others."""
    shared: set[int] = set()
    for node in schedule.nodes:
        if node.op != "matmul" or node.id not in inlined:
            continue
        current = node
        while True:
            readers = {u.id: u for u in users.get(current.id, [])}
            if len(readers) != 1:
                shared.add(node.id)
                break
            (current,) = readers.values()
            if current.id not in inlined:
                break
    return frozenset(shared)


def _reads_shape(user: Node, node: Node) -> bool:
    """``user`` reads only ``node``'s shape (the like input of a reshape_like...)."""
    return user.op in LIKE_OPS and user.inputs[0] is not node


def _shape_only(user: Node, node: Node) -> bool:
    """``user`` reads ``node`` only at inputs that give a shape (`SHAPE_INPUTS`: the
    like input of a ``sum_to_like``, a bias's cast read for its gradient's shape)."""
    positions = SHAPE_INPUTS.get(user.op, ())
    return all(k in positions for k, i in enumerate(user.inputs) if i is node)


def _reads_view(user: Node, node: Node, inlined: set[int]) -> bool:
    """``user`` reads ``node``'s value through strides (or only its shape)."""
    return (
        user.op in ("matmul", *EXPRESSION_OPS)
        or (user.op in LAZY_VIEWS | {"transpose", "scatter_slice"} and user.id in inlined)
        or _reads_shape(user, node)
    )


def _passes_through(node: Node, types: Types) -> bool:
    """A view whose input broadcasts to its users exactly as its output would: the
    shapes agree once leading 1s are dropped (``sum_to_like`` to the same shape)."""
    if node.op not in VIEW_OPS:
        return False
    return _core(types[node.inputs[0].id].shape) == _core(types[node.id].shape)


def _core(shape: tuple[int, ...]) -> tuple[int, ...]:
    dims = list(shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    return tuple(dims)


def _keeps_last_axis(node: Node) -> bool:
    """A transpose that keeps its input's last axis among the matrix axes (attention's
    heads move, a matrix is transposed): a matmul reads the result through strides."""
    axes = tuple(node.attrs["axes"])
    n = len(axes)
    return n >= 2 and n - 1 in axes[-2:]


def _row_axes(node: Node, types: Types) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The elements' shape and the reduced axes of a float32 row op or row reduction."""
    if not node.inputs or types[node.id].dtype != "float32":
        return None
    shape = tuple(types[node.inputs[0].id].shape)
    if node.op in ROW_OPS:
        rows = get_op(node.op).rows
        if rows is None:
            return None
        return shape, rows(len(shape), len(node.inputs), **node.attrs).axes
    axes = reduction_axes(node.op, node.attrs, shape)
    return None if axes is None else (shape, axes)


def _row_kernel(node: Node, users: Users, inlined: frozenset[int]) -> Node | None:
    """The launched node whose kernel is the row op ``node``'s: itself, or the one
    elementwise reader it is the output expression of, directly or through inlined
    elementwise readers (the first reader of one read by several: the kernel that
    computes it first and stores it, `stored_chains`)."""
    if node.op not in ROW_OPS:
        return None
    if node.id not in inlined:
        return node
    following = users.get(node.id, [])
    if not following:
        return None
    current = following[0]  # several: the first computes it (and stores it)
    for _ in range(MAX_EPILOGUE_SEARCH):
        if current.id not in inlined:
            return current
        after = users.get(current.id, [])
        if current.op not in EXPRESSION_OPS or not after:
            return None
        current = after[0]
    return None


def row_siblings(
    schedule: Schedule,
    users: Users,
    inlined: frozenset[int],
    types: Types,
    written: set[int],
    stored: frozenset[int] = frozenset(),
) -> dict[int, list[tuple[int, list[int]]]]:
    """Elementwise kernels computed in an earlier row kernel over the same rows.

    A launched elementwise node whose expression reads an inlined row program (a
    layer norm's normalised value times the gradient, for its weight's gradient) is
    computed by the kernel of the last row op before it over the same elements and
    axes that reads an input of that program (the op, or the reader it is the output
    expression of), when everything the node reads is made before that kernel
    (`asgrad.gpu.plan.fusion_rows`: the sibling is stored beside its output).
    Kernel's node id -> (the node, its inlined inputs in schedule order). A ``stored``
    chain (`stored_chains`) is read as the array its row kernel stored, not through
    its inputs.
    """
    index = {n.id: i for i, n in enumerate(schedule.nodes)}
    result: dict[int, list[tuple[int, list[int]]]] = {}
    for node in schedule.nodes:
        if node.id in inlined or node.id in written or node.op not in EXPRESSION_OPS:
            continue  # (an update value is written where its variable is)
        closure: dict[int, Node] = {}
        frontier: set[int] = set()
        stack = list(node.inputs)
        while stack and len(closure) <= MAX_EPILOGUE_SEARCH:
            current = stack.pop()
            if current.id in inlined and current.id not in stored:
                if current.id not in closure:
                    closure[current.id] = current
                    stack.extend(current.inputs)
            else:
                frontier.add(current.id)
        if stack:
            continue
        programs = [n for n in closure.values() if _row_axes(n, types) is not None]
        if len(programs) != 1:
            continue
        (inner,) = programs
        rows = _row_axes(inner, types)
        latest = max((index[f] for f in frontier), default=-1)
        host: Node | None = None
        for source in inner.inputs:
            for u in users.get(source.id, []):
                kernel = _row_kernel(u, users, inlined)
                if kernel is None or _row_axes(u, types) != rows:
                    continue
                between = latest < index[kernel.id] < index[node.id]
                if between and (host is None or index[kernel.id] > index[host.id]):
                    host = kernel
        if host is not None:
            order = sorted(closure, key=index.__getitem__)
            result.setdefault(host.id, []).append((node.id, order))
    return result
