"""The schedule: what a compiled program computes, in which order, until when.

[`make_schedule`][asgrad.tensor.make_schedule] turns the values a user wants (and the variable
updates of a training step) into a [`Schedule`][asgrad.tensor.Schedule], after the graph passes;
every backend compiles schedules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from asgrad.tensor.errors import AsgradError, FeedError, GraphError
from asgrad.tensor.ir.graph import Node, Variable
from asgrad.tensor.ir.memory import MemoryPlan, last_uses, plan_memory
from asgrad.tensor.ir.passes import optimize
from asgrad.tensor.ir.registry import TensorType, get_op
from asgrad.tensor.ir.remat import rematerialize
from asgrad.tensor.ir.saved_half import read_saved_half

if TYPE_CHECKING:  # the IR names the API's Tensor in annotations only
    from asgrad.tensor.api.tensor import Tensor

Updates: TypeAlias = "Mapping[Variable, Tensor] | Sequence[tuple[Variable, Tensor]]"


@dataclass
class Schedule:
    """A backend-independent plan: what to compute, in which order, until when.

    Attributes:
        nodes: Every node to compute, inputs before users.
        outputs: The nodes whose values are returned.
        updates: ``(variable, node)`` pairs: after a run, the variable holds the node.
        inputs: The input nodes that must be fed.
        last_use: For each node id, the index in ``nodes`` of its last user (outputs
            and update values live to the end).
        memory_budget: The bytes a run may hold at once (``compile``'s
            ``memory_budget``), or None; the CPU backend caps its scratch buffers to
            what the planned peak leaves of it.

    >>> from asgrad.tensor import Graph, make_schedule
    >>> x = Graph().input("x", (2,))
    >>> schedule = make_schedule([x * 2.0 + 1.0])
    >>> [node.op for node in schedule.inputs], len(schedule.outputs)
    (['input'], 1)
    """

    nodes: list[Node]
    outputs: list[Node]
    updates: list[tuple[Variable, Node]]
    inputs: list[Node]
    last_use: dict[int, int] = field(default_factory=dict)
    memory_budget: int | None = None

    def memory(self, feed_shapes: Mapping[str, tuple[int, ...]] | None = None) -> MemoryPlan:
        """The planned memory of a run (`asgrad.tensor.ir.memory`), at the declared
        shapes or, given ``feed_shapes``, at those of the feeds."""
        types = None if feed_shapes is None else self.infer_types(feed_shapes)
        roots = self.outputs + [n for _, n in self.updates]
        return plan_memory(self.nodes, roots, types)

    def variables(self) -> list[Variable]:
        return [n.attrs["variable"] for n in self.nodes if n.op == "parameter"]

    def infer_types(self, feed_shapes: Mapping[str, tuple[int, ...]]) -> dict[int, TensorType]:
        """Every node's type when the inputs have ``feed_shapes`` (any batch size).

        Raises the op's shape error, naming the node's source line, when the fed
        shapes do not fit the graph.
        """
        types: dict[int, TensorType] = {}
        for node in self.nodes:
            if node.op == "input":
                shape = feed_shapes.get(node.name, node.shape)
                types[node.id] = TensorType(tuple(shape), node.dtype)
            elif not node.inputs:
                types[node.id] = node.type
            else:
                try:
                    types[node.id] = get_op(node.op).infer(
                        [types[n.id] for n in node.inputs], node.attrs
                    )
                except AsgradError as exc:
                    raise FeedError(
                        f"with inputs shaped {dict(feed_shapes)}, {node.op} (made at"
                        f" {node.location}) fails: {exc}"
                    ) from None
        return types


def make_schedule(
    outputs: Sequence[Tensor],
    updates: Updates | None = None,
    *,
    optimize_graph: bool = True,
    memory_budget: int | None = None,
) -> Schedule:
    """Plan the computation of ``outputs`` and ``updates`` (see
    [`Schedule`][asgrad.tensor.Schedule]).

    ``memory_budget`` (bytes) recomputes chosen forward values in the backward pass so
    that the planned peak at the declared shapes fits (`asgrad.tensor.ir.remat`); it
    raises [`MemoryBudgetError`][asgrad.tensor.MemoryBudgetError] when no choice does.

    >>> from asgrad.tensor import Graph, make_schedule
    >>> x = Graph().input("x", (2,))
    >>> [node.op for node in make_schedule([(x * 2.0).exp()]).nodes][-1]
    'exp'
    """
    pairs = list(updates.items()) if isinstance(updates, Mapping) else list(updates or [])
    roots = [t.node for t in outputs] + [t.node for _, t in pairs]
    graphs = {n.graph for n in roots}
    if len(graphs) > 1:
        names = ", ".join(sorted(g.label for g in graphs))
        raise GraphError(f"outputs come from different graphs ({names}); compile each on its own")
    for var, value in pairs:
        if not isinstance(var, Variable):
            raise GraphError(f"updates are keyed by Variable, got {type(var).__name__}")
        if value.shape != var.shape or value.dtype != var.dtype:
            raise GraphError(
                f"update of {var.name!r}: value is {value.node.type}, the variable holds"
                f" {var.dtype}{list(var.shape)}"
            )
    if optimize_graph:
        nodes, new_roots = optimize(roots)
    else:
        from asgrad.tensor.ir.passes import topological_order

        nodes, new_roots = topological_order(roots), roots
    nodes, new_roots = read_saved_half(nodes, new_roots)
    if memory_budget is not None:
        nodes, new_roots, _ = rematerialize(nodes, new_roots, memory_budget)
    outs = new_roots[: len(outputs)]
    ups = [(var, n) for (var, _), n in zip(pairs, new_roots[len(outputs) :], strict=True)]
    last_use = last_uses(nodes, new_roots)
    inputs = [n for n in nodes if n.op == "input"]
    return Schedule(nodes, outs, ups, inputs, last_use, memory_budget)
