"""Graph passes: ordering, dead-code and common-subexpression elimination, folding.

Passes never change the user's graph. [`optimize`][asgrad.tensor.optimize] returns a new, minimal
list of nodes (sharing the user's leaves) that computes the same outputs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import GraphError
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import OpDef, TensorType, get_op


def topological_order(roots: Iterable[Node]) -> list[Node]:
    """Every node the ``roots`` depend on, inputs before users (iterative DFS).

    >>> from asgrad.tensor import Graph, topological_order
    >>> x = Graph().input("x", (2,))
    >>> [node.op for node in topological_order([(x.exp() + x).node])]
    ['input', 'exp', 'add']
    """
    order: list[Node] = []
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    for root in roots:
        if state.get(root.id) == 2:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        state[root.id] = 1
        while stack:
            node, i = stack[-1]
            if i < len(node.inputs):
                stack[-1] = (node, i + 1)
                child = node.inputs[i]
                s = state.get(child.id)
                if s is None:
                    state[child.id] = 1
                    stack.append((child, 0))
                elif s == 1:
                    raise GraphError(f"the graph has a cycle through {child.name}")
            else:
                stack.pop()
                state[node.id] = 2
                order.append(node)
    return order


def _attr_key(value: Any) -> Hashable:
    if isinstance(value, np.ndarray):
        if value.size <= 64:
            return ("array", value.dtype.str, value.shape, value.tobytes())
        return ("array-id", id(value))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, tuple | list):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _attr_key(v)) for k, v in value.items()))
    if isinstance(value, float | int | str | bool | type(None)):
        return (type(value).__name__, value)
    return ("id", id(value))


def node_key(node: Node, inputs: Sequence[Node]) -> Hashable:
    """A key equal for two nodes that compute the same value."""
    return (node.op, tuple(n.id for n in inputs), _attr_key(node.attrs), node.type)


def _rebuild(node: Node, inputs: tuple[Node, ...]) -> Node:
    if all(a is b for a, b in zip(inputs, node.inputs, strict=True)):
        return node
    return Node(
        node.graph, node.op, inputs, node.attrs, node.type, node.name, node.location, node.meta
    )


# Constants of at most this many elements are folded into the graph.
FOLD_LIMIT = 4096


def _size(node: Node) -> int:
    return math.prod(node.shape)


def _fold(node: Node, inputs: tuple[Node, ...]) -> Node | None:
    """A constant node for ``node`` when every input is a small constant."""
    if not inputs or not get_op(node.op).pure or any(n.op != "constant" for n in inputs):
        return None
    # Sizes are checked before anything is computed: a small constant broadcast to a
    # large shape is no candidate.
    if any(n.attrs["value"].size > FOLD_LIMIT for n in inputs) or _size(node) > FOLD_LIMIT:
        return None
    value = get_op(node.op).kernel(*(n.attrs["value"] for n in inputs), **node.attrs)
    array = np.array(value, dtype=node.dtype)
    if array.shape != node.shape:
        return None
    array.setflags(write=False)
    return Node(
        node.graph, "constant", (), {"value": array}, node.type, None, node.location, node.meta
    )


def is_identity(op: OpDef, input_type: TensorType, output_type: TensorType, *, exact: bool) -> bool:
    """Whether a node of ``op`` computes nothing: ``op`` is an identity at the same
    type (``OpDef.identity_if_same_type``) and the types of its first input and its
    result are equal.

    An op that reads its target shape from a shape-only input at run time (the
    ``*_like`` ops) is one only when no axis has size 1, unless the types are
    ``exact`` (the fed ones): a size declared 1 may be fed larger. An op whose
    target shape is an attribute (a reshape to ``(3, -1)``) is one only at ``exact``
    types: fed another batch size, the same attribute means another shape.
    """
    if not op.identity_if_same_type or input_type != output_type:
        return False
    if op.result_shape_from_attrs and not exact:
        return False
    return exact or not op.shape_only_inputs or 1 not in output_type.shape


def _simplify(node: Node, inputs: tuple[Node, ...]) -> Node | None:
    """Identities that need no computation: reshape/cast/broadcast to the same type."""
    if inputs and is_identity(get_op(node.op), inputs[0].type, node.type, exact=False):
        return inputs[0]
    return None


def _scan_key(node: Node, loop: Any) -> Hashable:
    return (
        id(loop),
        tuple(n.id for n in node.inputs),
        node.attrs.get("length"),
        bool(node.attrs.get("reverse")),
    )


def _scan_extensions(order: Sequence[Node]) -> dict[Hashable, Node]:
    """The scans whose body extends another's (``Body.extends``: the same carries and
    ys, then more ys, saved for a gradient) and that save their carries, by the key of
    the scan they extend: the same inputs, length and direction."""
    found: dict[Hashable, Node] = {}
    for node in order:
        if node.op == "scan" and node.attrs.get("save"):
            base = getattr(node.attrs["loop"], "extends", None)
            if base is not None:
                found.setdefault(_scan_key(node, base), node)
    return found


def _merged_part(node: Node, ext: Node, replaced: dict[int, Node]) -> Node:
    """``node``, a part of a scan that ``ext`` extends, as the same part of ``ext``
    (its saved carries come after ``ext``'s extra ys)."""
    part = int(node.attrs["part"])
    loop = node.attrs["loop"]
    if part >= loop.n_carry + loop.n_y:
        part += ext.attrs["loop"].n_y - loop.n_y
    inputs = (replaced[ext.id], *(replaced[n.id] for n in node.inputs[1:]))
    attrs = {**ext.attrs, "part": part}
    return Node(node.graph, node.op, inputs, attrs, node.type, node.name, node.location, node.meta)


def optimize(
    roots: Sequence[Node], *, fold_constants: bool = True
) -> tuple[list[Node], list[Node]]:
    """Dead code, common subexpressions, constant folding and identities; a scan whose
    body another scan extends (the same inputs) is read from that one.

    Returns ``(nodes, new_roots)``: the nodes to compute in order, and what each
    root became.

    >>> from asgrad.tensor import Graph, optimize
    >>> x = Graph().input("x", (2,))
    >>> nodes, (root,) = optimize([(x.exp() + x.exp()).node])  # one exp is computed
    >>> [node.op for node in nodes]
    ['input', 'exp', 'add']
    """
    replaced: dict[int, Node] = {}
    seen: dict[Hashable, Node] = {}
    order = topological_order(roots)
    extensions = _scan_extensions(order)
    merged: dict[int, Node] = {}  # a scan's id -> the scan extending it
    for node in order:
        if node.id in replaced:  # an extending scan, made where the scan it extends was
            continue
        if node.op == "scan_part" and node.inputs[0].id in merged:
            part = _merged_part(node, merged[node.inputs[0].id], replaced)
            replaced[node.id] = seen.setdefault(node_key(part, part.inputs), part)
            continue
        inputs = tuple(replaced[n.id] for n in node.inputs)
        new: Node | None = None
        if node.op not in ("input", "parameter"):
            new = _simplify(node, inputs)
            if new is None and fold_constants:
                new = _fold(node, inputs)
        if new is None:
            new = _rebuild(node, inputs)
        if new.op not in ("input", "parameter") and get_op(new.op).pure:
            key = node_key(new, new.inputs)
            new = seen.setdefault(key, new)
        replaced[node.id] = new
        ext = extensions.get(_scan_key(node, node.attrs["loop"])) if node.op == "scan" else None
        if ext is not None and ext is not node:
            if ext.id not in replaced:
                ext_new = _rebuild(ext, tuple(replaced[n.id] for n in ext.inputs))
                replaced[ext.id] = seen.setdefault(node_key(ext_new, ext_new.inputs), ext_new)
            merged[node.id] = ext
    new_roots = [replaced[r.id] for r in roots]
    return topological_order(new_roots), new_roots
