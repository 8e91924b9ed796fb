"""Orders of a schedule's nodes that hold fewer bytes at once, at no extra work.

The default schedule is a depth-first walk from the roots (`topological_order`): a
training step's backward chain runs down to the first layer before the gradients of
the weights it passed are computed, so every layer's backward values wait. Under a
memory budget (`asgrad.tensor.ir.remat`) the planner also tries:

- `reversed_roots`: the same walk with the roots after the first (the loss) taken
  last first, so that each parameter's gradient is computed as the chain reaches it;
- `deepest_first`: a depth-first walk (roots as in `reversed_roots`) that visits each
  node's inputs deepest first, so that what a gradient reads of the forward pass is
  made or viewed right before it, not before the backward chain it waits for;
- `memory_greedy`: a list schedule that runs, among the nodes whose inputs are
  ready, the one that adds the fewest bytes (its result's, less the inputs it is
  the last reader of), ties in depth-first order. It also serves a step whose every
  update waits for all the gradients (gradient clipping by the global norm).

and keeps the order whose planned peak is the smallest. Every order computes the same
nodes, so the values are bit-identical.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.memory import VIEW_OPS, nbytes
from asgrad.tensor.ir.passes import topological_order

__all__ = ["ORDERS", "Order", "deepest_first", "depth_first", "memory_greedy", "reversed_roots"]

# An order: the nodes computing ``roots``, inputs before users.
Order = Callable[[Sequence[Node]], list[Node]]
_LEAVES = frozenset({"input", "parameter", "constant"})


def depth_first(roots: Sequence[Node]) -> list[Node]:
    """The default order: a depth-first walk from the roots in turn."""
    return topological_order(roots)


def reversed_roots(roots: Sequence[Node]) -> list[Node]:
    """A depth-first walk from the first root, then from the others last first."""
    return topological_order([*roots[:1], *reversed(roots[1:])])


def deepest_first(roots: Sequence[Node]) -> list[Node]:
    """A depth-first walk that visits each node's inputs deepest first (the longest
    chain of ops behind it), so that a shallow input runs right before its reader.

    A weight's gradient ``transpose(x) @ dy`` then runs ``dy``'s long backward chain
    first and ``transpose(x)`` (or a norm recomputed by its gradient rule) just before
    the product, instead of holding it through the chain: the Sethi-Ullman order of
    register allocation, with depth for the registers.
    """
    depth: dict[int, int] = {}
    for node in topological_order(roots):
        depth[node.id] = 1 + max((depth[i.id] for i in node.inputs), default=-1)
    order: list[Node] = []
    done: set[int] = set()
    for root in [*roots[:1], *reversed(roots[1:])]:
        if root.id in done:
            continue
        stack: list[tuple[Node, list[Node]]] = [(root, _deepest_last(root, depth))]
        done.add(root.id)
        while stack:
            node, pending = stack[-1]
            while pending and pending[-1].id in done:
                pending.pop()
            if pending:
                child = pending.pop()
                done.add(child.id)
                stack.append((child, _deepest_last(child, depth)))
            else:
                stack.pop()
                order.append(node)
    return order


def _deepest_last(node: Node, depth: dict[int, int]) -> list[Node]:
    """``node``'s inputs, the deepest last (popped first)."""
    return sorted(node.inputs, key=lambda i: depth[i.id])


def memory_greedy(roots: Sequence[Node]) -> list[Node]:
    """Among the ready nodes, the one adding the fewest bytes first (see the module)."""
    base = topological_order(roots)
    position = {n.id: i for i, n in enumerate(base)}
    root_ids = {r.id for r in roots}
    users: dict[int, list[Node]] = {}
    for node in base:
        for i in dict.fromkeys(inp.id for inp in node.inputs):
            users.setdefault(i, []).append(node)
    remaining = {n.id: len(users.get(n.id, ())) for n in base}
    waiting = {n.id: len({i.id for i in n.inputs}) for n in base}

    def size(node: Node) -> int:
        return 0 if node.op in _LEAVES or node.op in VIEW_OPS else nbytes(node.type)

    def cost(node: Node) -> int:
        freed = sum(
            size(i)
            for i in {i.id: i for i in node.inputs}.values()
            if remaining[i.id] == 1 and i.id not in root_ids
        )
        return size(node) - freed

    order: list[Node] = []
    heap: list[tuple[int, int, Node]] = []
    done: set[int] = set()
    for node in base:
        if waiting[node.id] == 0:
            heapq.heappush(heap, (cost(node), position[node.id], node))
    while heap:
        key, pos, node = heapq.heappop(heap)
        if node.id in done:
            continue
        current = cost(node)
        if current != key:  # a stale entry: its inputs' readers changed
            heapq.heappush(heap, (current, pos, node))
            continue
        done.add(node.id)
        order.append(node)
        for read in {inp.id: inp for inp in node.inputs}.values():
            remaining[read.id] -= 1
            if remaining[read.id] == 1:  # its last reader now frees it: cheaper
                for user in users[read.id]:
                    if user.id not in done and waiting[user.id] == 0:
                        heapq.heappush(heap, (cost(user), position[user.id], user))
        for user in users.get(node.id, ()):
            waiting[user.id] -= 1
            if waiting[user.id] == 0:
                heapq.heappush(heap, (cost(user), position[user.id], user))
    return order


ORDERS: tuple[Order, ...] = (memory_greedy, depth_first, reversed_roots, deepest_first)
"""The orders the planner tries under a budget, in turn: the memory-greedy one first
(it reached the smallest peaks on the transformer steps measured)."""
