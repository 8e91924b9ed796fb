"""Graph passes: ordering, dead-code and common-subexpression elimination, folding.

Passes never change the user's graph. :func:`optimize` returns a new, minimal list
of nodes (sharing the user's leaves) that computes the same outputs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import GraphError
from asgrad.tensor.graph import Node
from asgrad.tensor.registry import get_op

# Ops whose value changes from run to run even with equal inputs: never merged or folded.
IMPURE_OPS: set[str] = set()


def topological_order(roots: Iterable[Node]) -> list[Node]:
    """Every node the ``roots`` depend on, inputs before users (iterative DFS)."""
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


def dead_code_elimination(roots: Sequence[Node]) -> list[Node]:
    """Only the nodes that the ``roots`` need, in topological order."""
    return topological_order(roots)


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
    return Node(node.graph, node.op, inputs, node.attrs, node.type, node.name, node.location)


def _fold(node: Node, inputs: tuple[Node, ...]) -> Node | None:
    """A constant node for ``node`` when every input is a small constant."""
    if not inputs or node.op in IMPURE_OPS or any(n.op != "constant" for n in inputs):
        return None
    if any(n.attrs["value"].size > 4096 for n in inputs):
        return None
    value = get_op(node.op).kernel(*(n.attrs["value"] for n in inputs), **node.attrs)
    array = np.array(value, dtype=node.dtype)
    if array.shape != node.shape:
        return None
    array.setflags(write=False)
    return Node(node.graph, "constant", (), {"value": array}, node.type, None, node.location)


# Ops that compute nothing when their output type equals their first input's.
IDENTITY_OPS = frozenset({"reshape", "broadcast_to", "cast"})
# The same for ops that read their target shape from another value at run time.
SHAPE_LIKE_IDENTITY_OPS = frozenset({"reshape_like", "broadcast_like", "sum_to_like"})


def _simplify(node: Node, inputs: tuple[Node, ...]) -> Node | None:
    """Identities that need no computation: reshape/cast/broadcast to the same type."""
    if node.op in IDENTITY_OPS and inputs[0].type == node.type:
        return inputs[0]
    # Fix: the *_like ops read their target shape at run time, where an axis declared
    # with size 1 may have grown (batch declared 1, fed 7); drop them only when no
    # axis is 1, so that static equality implies run-time equality.
    if node.op in SHAPE_LIKE_IDENTITY_OPS and inputs[0].type == node.type and 1 not in node.shape:
        return inputs[0]
    return None


def optimize(
    roots: Sequence[Node], *, fold_constants: bool = True
) -> tuple[list[Node], list[Node]]:
    """Dead code, common subexpressions, constant folding and identities.

    Returns ``(nodes, new_roots)``: the nodes to compute in order, and what each
    root became.
    """
    replaced: dict[int, Node] = {}
    seen: dict[Hashable, Node] = {}
    for node in topological_order(roots):
        inputs = tuple(replaced[n.id] for n in node.inputs)
        new: Node | None = None
        if node.op not in ("input", "parameter"):
            new = _simplify(node, inputs)
            if new is None and fold_constants:
                new = _fold(node, inputs)
        if new is None:
            new = _rebuild(node, inputs)
        if new.op not in IMPURE_OPS and new.op not in ("input", "parameter"):
            key = node_key(new, new.inputs)
            new = seen.setdefault(key, new)
        replaced[node.id] = new
    new_roots = [replaced[r.id] for r in roots]
    return topological_order(new_roots), new_roots
