"""Rematerialization: recompute chosen forward values in the backward to meet a memory budget.

A training step keeps every forward value that a gradient reads until the backward
pass reads it, and those activations are most of its peak. `rematerialize` trades
work for memory: for a chosen forward value, the backward reads a *recomputed* copy
(the same op on the same inputs, a new node with role ``"recompute"``) made right
before its first backward reader, so the original dies with its last forward reader.
The graph-to-graph pass is exact: the copy runs the same kernel on the same values,
so the gradients are bit-identical to the unbudgeted step's on the same backend.

The choice is greedy (a heuristic, not an optimum): while the planned peak
(`asgrad.tensor.ir.memory.plan_memory`) is over the budget, among the forward values
held at the peak step that a gradient reads, take them in order of bytes freed per
unit of work recomputed (`work`), the best quarter at once, then halves of it, then
one at a time; keep a batch when it lowers the bytes over the budget summed over the
steps, without raising the peak. A chosen value's forward inputs are held until the
copy runs, unless no backward node reads them: then they are recomputed too, first,
in a chain of at most `CHAIN` values. When no choice lowers the excess any further,
in any of the orders tried (`asgrad.tensor.ir.memory_order`), the budget cannot be
met: `MemoryBudgetError` names the smallest peak reached.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from asgrad.tensor.errors import MemoryBudgetError
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.memory import (
    VIEW_OPS,
    MemoryPlan,
    format_bytes,
    forward_ids,
    last_uses,
    nbytes,
    plan_memory,
)
from asgrad.tensor.ir.memory_order import ORDERS, depth_first
from asgrad.tensor.ir.passes import topological_order
from asgrad.tensor.ir.registry import get_op

__all__ = ["rematerialize", "work"]

_NOT_RECOMPUTED = frozenset({"input", "parameter", "constant"})


def work(node: Node) -> int:
    """A node's cost in element operations: a matrix product's multiply-adds
    (``2 * out * k``), a convolution's (``2 * out * weight[1:]``), else the elements it
    reads and writes.

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> a, b = g.input("a", (4, 8)), g.input("b", (8, 16))
    >>> work((a @ b).node), work((a + 1.0).node)
    (1024, 65)
    """
    out = math.prod(node.shape)
    if node.op == "matmul" and node.inputs and node.inputs[0].shape:
        return 2 * out * node.inputs[0].shape[-1]
    if node.op.startswith("conv") and len(node.inputs) > 1:
        return 2 * out * math.prod(node.inputs[1].shape[1:])
    return out + sum(math.prod(i.shape) for i in node.inputs)


def _recomputable(node: Node, forward: set[int]) -> bool:
    return (
        node.op not in _NOT_RECOMPUTED
        and node.op not in VIEW_OPS
        and node.id in forward
        and get_op(node.op).pure
    )


def with_recomputed(
    nodes: Sequence[Node], roots: Sequence[Node], chosen: set[int], forward: set[int]
) -> tuple[list[Node], list[Node]]:
    """The nodes and roots where every backward reader of a ``chosen`` value reads a
    recomputed copy of it instead (copies of chosen inputs, recursively); the nodes in
    the order of ``nodes``, each copy right before its first reader."""
    copies: dict[int, Node] = {}
    ordered: list[Node] = []
    rebuilt: dict[int, Node] = {}
    chosen = set(chosen)
    for node in nodes:  # a forward view of a recomputed value is recomputed with it
        forward_view = node.op in VIEW_OPS and node.id in forward and node.inputs
        if forward_view and node.inputs[0].id in chosen:
            chosen.add(node.id)

    def copy(node: Node) -> Node:
        made = copies.get(node.id)
        if made is None:
            inputs = tuple(copy(i) if i.id in chosen else i for i in node.inputs)
            meta = {**node.meta, "role": "recompute", "recomputes": node.name}
            made = Node(
                node.graph,
                node.op,
                inputs,
                node.attrs,
                node.type,
                f"{node.name}_recomputed",
                node.location,
                meta,
            )
            copies[node.id] = made
            ordered.append(made)  # after the copies it reads, before its first reader
        return made

    for node in nodes:
        if node.id in forward:
            rebuilt[node.id] = node
        else:
            inputs = tuple(copy(i) if i.id in chosen else rebuilt[i.id] for i in node.inputs)
            rebuilt[node.id] = node.with_inputs(inputs)
        ordered.append(rebuilt[node.id])
    new_roots = [rebuilt[r.id] for r in roots]
    # a value made only for the backward (a gradient's transpose of an activation) that
    # is now recomputed has no reader left
    needed = {n.id for n in topological_order(new_roots)}
    return [n for n in ordered if n.id in needed], new_roots


def rematerialize(
    nodes: Sequence[Node], roots: Sequence[Node], budget: int
) -> tuple[list[Node], list[Node], MemoryPlan]:
    """Nodes and roots whose planned peak (at the declared shapes) is at most ``budget``
    bytes, recomputing forward values in the backward as few and as cheap as the
    greedy choice finds (see the module's docstring); also returns the plan.

    The order matters as much as the choice, and changing it costs nothing: the
    greedy choice runs on each order of `asgrad.tensor.ir.memory_order.ORDERS` in
    turn (the memory-greedy one first) until one fits.

    Raises:
        MemoryBudgetError: No choice in any order brings the planned peak within
            ``budget``.
    """
    plan = plan_memory(nodes, roots)
    if plan.peak <= budget:
        return list(nodes), list(roots), plan
    unbudgeted = plan.peak
    forward = forward_ids(nodes, roots)
    best: tuple[list[Node], list[Node], MemoryPlan] | None = None
    for order in ORDERS:
        base = list(nodes) if order is depth_first else order(roots)
        found = _choose(base, roots, budget, plan_memory(base, roots, forward=forward), forward)
        if best is None or found[2].peak < best[2].peak:
            best = found
        if best[2].peak <= budget:
            return best
    assert best is not None
    plan = best[2]
    raise MemoryBudgetError(
        f"no recomputation plan fits the memory budget of {format_bytes(budget)}"
        f" ({budget:,} bytes): the smallest planned peak reached is"
        f" {format_bytes(plan.peak)} ({plan.peak:,} bytes; {format_bytes(unbudgeted)}"
        f" without recomputation), of which parameters {format_bytes(plan.parameters)},"
        f" optimizer and other state {format_bytes(plan.state)}, inputs"
        f" {format_bytes(plan.inputs)}. Raise memory_budget to at least {plan.peak:,},"
        " or feed smaller batches",
        budget=budget,
        reachable=plan.peak,
    )


def _choose(
    base: list[Node], roots: Sequence[Node], budget: int, plan: MemoryPlan, forward: set[int]
) -> tuple[list[Node], list[Node], MemoryPlan]:
    """The greedy choice on the nodes in the order ``base``: the best nodes, roots and
    plan it reaches (over ``budget`` when none fits)."""
    best_nodes, best_roots = base, list(roots)
    chosen: set[int] = set()
    rejected: set[int] = set()
    while plan.peak > budget:
        candidates = _held_at_peak(best_nodes, best_roots, plan, chosen | rejected, forward)
        if not candidates:
            break
        # a batch of the best choices at once, halved while it does not help: a deep
        # model's plan is not rebuilt for each of its hundreds of choices
        size = max(1, len(candidates) // BATCH)
        while candidates:
            trial = chosen.union(*(chain for _, chain in candidates[:size]))
            trial_nodes, trial_roots = with_recomputed(base, roots, trial, forward)
            trial_plan = plan_memory(trial_nodes, trial_roots, forward=forward)
            if trial_plan.peak <= plan.peak and _excess(trial_plan, budget) < _excess(plan, budget):
                chosen, plan = trial, trial_plan
                best_nodes, best_roots = trial_nodes, trial_roots
                break
            if size > 1:
                size //= 2
            else:
                rejected.add(candidates.pop(0)[0])
        else:
            break
    return best_nodes, best_roots, plan


def _excess(plan: MemoryPlan, budget: int) -> int:
    """Bytes over ``budget``, summed over the steps: a choice that lowers one of several
    equal peaks lowers it, where the peak itself stays."""
    return sum(held - budget for held in plan.live if held > budget)


def _held_at_peak(
    nodes: Sequence[Node],
    roots: Sequence[Node],
    plan: MemoryPlan,
    excluded: set[int],
    forward: set[int],
) -> list[tuple[int, set[int]]]:
    """Choices that may lower the plan's peak, most bytes freed per unit of work first.

    A choice is a forward value held at the peak step that a backward node reads, with
    the chain of forward values it is recomputed from that no backward node reads
    (recomputing those too keeps them from being held until the copy runs); the chain
    stops at values the backward reads anyway, at leaves, and after `CHAIN` values.
    """
    step = plan.peak_step
    last = last_uses(nodes, roots)
    root_ids = {r.id for r in roots}
    read_by_backward: set[int] = set()
    for node in reversed(nodes):  # through forward views too
        if node.id not in forward or (node.id in read_by_backward and node.op in VIEW_OPS):
            read_by_backward.update(i.id for i in node.inputs)
    choices: list[tuple[float, int, set[int]]] = []
    for i, node in enumerate(nodes[: step + 1]):
        if (
            node.id in read_by_backward
            and node.id not in excluded
            and node.id not in root_ids
            and last.get(node.id, i) >= step
            and _recomputable(node, forward)
        ):
            chain = _chain(node, read_by_backward, root_ids, forward)
            cost = sum(work(n) for n in chain.values())
            choices.append((nbytes(node.type) / max(cost, 1), node.id, set(chain)))
    choices.sort(key=lambda c: c[0], reverse=True)
    return [(head, chain) for _, head, chain in choices]


# The first batch of choices tried at once is the best 1/BATCH of them.
BATCH = 4

# The most values one choice recomputes (the value and the chain it is recomputed from).
CHAIN = 8


def _chain(
    node: Node, read_by_backward: set[int], root_ids: set[int], forward: set[int]
) -> dict[int, Node]:
    chain = {node.id: node}
    stack = [node]
    while stack and len(chain) < CHAIN:
        for i in stack.pop().inputs:
            if (
                i.id not in chain
                and i.id not in read_by_backward
                and i.id not in root_ids
                and (_recomputable(i, forward) or (i.op in VIEW_OPS and i.id in forward))
                and len(chain) < CHAIN
            ):
                chain[i.id] = i
                stack.append(i)
    return chain
