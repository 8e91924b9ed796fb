"""The gradient program split at bucket boundaries, so each bucket can leave early.

One compiled gradient program hands back its buckets only when the whole backward
pass is done. To start a bucket's all-reduce while the rest of the backward runs, the
graph is cut into *stages*, one per bucket, in the order the buckets are planned
(parameters last to first, the order backpropagation produces their gradients):

* stage 0 computes the loss, the extra outputs, the graph's own updates and bucket 0
  (the last layers' gradients), with everything they need: the whole forward pass
  and the first part of the backward;
* stage k computes bucket k from the nodes not computed before: the values of
  earlier stages it reads (*boundaries*: activations, the backward's running
  cotangents) are outputs of the stage that made them and inputs of stage k; leaves
  (the graph's inputs, parameters, constants) are read again by every stage.

Every node is computed exactly once, by the same ops on the same values, so the
buckets are bit-identical to the single program's (the MPI test checks it). When a
later stage reads a variable that the graph updates (a dropout seed, a batch-norm
statistic), the updates move to the last stage, so every stage reads the values of
this step. The stages are compiled at the declared input shapes; a graph whose
expansions are specialised to them (`asgrad.tensor.ir.retrace`) or that nests loop
bodies is not split (`split_gradients` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.nn.errors import DistributedError
from asgrad.tensor import Graph, Program, Tensor, Variable, compile, topological_order
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.retrace import needs_retrace

__all__ = [
    "Stage",
    "SumStage",
    "cross_rank_sum",
    "has_sums",
    "split_at_sums",
    "split_gradients",
]


@dataclass
class Stage:
    """One piece of the split gradient program.

    Its outputs are ``[*heads, bucket, *sent]``: the loss and extra outputs (stage 0
    only), its bucket, then the boundary values later stages read (fed to them as
    ``received`` names).
    """

    program: Program
    heads: int
    feeds: list[str]  # the graph's input names this stage reads
    received: list[str]  # boundary inputs, fed by earlier stages
    sent: list[str] = field(default_factory=list)  # boundary names of its extra outputs
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # declared feed shapes

    def run(self, feeds: Mapping[str, Any], boundary: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run with the graph's ``feeds`` and the ``boundary`` values; store what it sends."""
        mine: dict[str, Any] = {name: feeds[name] for name in self.feeds}
        for name in self.received:
            mine[name] = boundary[name]
        results = self.program(mine)
        first_sent = len(results) - len(self.sent)
        for name, value in zip(self.sent, results[first_sent:], strict=True):
            boundary[name] = value
        return results[:first_sent]


def _boundary_name(node: Node) -> str:
    return f"stage_boundary_{node.id}"


def _splittable(nodes: Sequence[Node], graph: Graph) -> bool:
    for node in nodes:
        if node.graph is not graph or any(isinstance(v, Graph) for v in node.attrs.values()):
            return False
    return True


class _Copier:
    """Copies nodes of the whole graph into one stage's graph, boundaries as inputs."""

    def __init__(self, graph: Graph, boundary: set[int]) -> None:
        self.graph = graph
        self.boundary = boundary
        self.made: dict[int, Node] = {}
        self.feeds: list[str] = []
        self.shapes: dict[str, tuple[int, ...]] = {}

    def copy(self, node: Node) -> Node:
        """``node``'s twin, with its ancestors' (a walk that stops at boundaries)."""
        g, made = self.graph, self.made
        stack = [(node, False)]
        while stack:
            n, ready = stack.pop()
            if n.id in made:
                continue
            if not ready and n.inputs and n.id not in self.boundary:
                stack.append((n, True))  # made once every input is (pushed after it)
                stack.extend((i, False) for i in reversed(n.inputs) if i.id not in made)
                continue
            if n.id in self.boundary:
                made[n.id] = g.input(_boundary_name(n), n.shape, n.dtype, free=()).node
            elif n.op == "input":
                made[n.id] = g.input(n.name, n.shape, n.dtype, free=n.attrs["free"]).node
                self.feeds.append(n.name)
                self.shapes[n.name] = tuple(n.shape)
            elif n.op == "parameter":
                made[n.id] = g.parameter(n.name, variable=n.attrs["variable"]).node
            else:
                inputs = tuple(made[i.id] for i in n.inputs)
                twin = Node(g, n.op, inputs, n.attrs, n.type, n.name, n.location, n.meta)
                g.nodes.append(twin)
                made[n.id] = twin
        return made[node.id]

    def tensor(self, node: Node) -> Tensor:
        return Tensor(self.copy(node))


def split_gradients(
    heads: Sequence[Tensor],
    buckets: Sequence[Tensor],
    updates: Mapping[Variable, Tensor],
    *,
    backend: str | None,
    debug: bool | None,
) -> list[Stage] | None:
    """One [`Stage`][asgrad.nn.distributed.stages.Stage] per bucket (None: not splittable).

    ``heads`` (the loss, the extra outputs) and ``updates`` go to stage 0 (the updates
    to the last stage when a later stage reads an updated variable); ``buckets[k]``
    is stage k's.
    """
    if len(buckets) < 2:
        return None
    graph = heads[0].graph
    roots = [t.node for t in heads] + [t.node for t in buckets] + [t.node for t in updates.values()]
    everything = topological_order(roots)
    if needs_retrace(roots) or not _splittable(everything, graph):
        return None
    stage_of: dict[int, int] = {}
    first = [t.node for t in heads] + [t.node for t in updates.values()] + [buckets[0].node]
    for k, wanted in enumerate([first] + [[b.node] for b in buckets[1:]]):
        for node in topological_order(wanted):
            stage_of.setdefault(node.id, k)
    last = len(buckets) - 1
    updated = {id(v) for v in updates}
    # Leaves belong to no stage: each stage reads the ones its nodes use.
    late_updates = any(
        i.op == "parameter" and id(i.attrs["variable"]) in updated
        for n in everything
        if stage_of[n.id] > 0
        for i in n.inputs
    )
    # What each stage reads from earlier ones: computed (not leaf) inputs of its nodes.
    received: list[list[Node]] = [[] for _ in buckets]
    seen: list[set[int]] = [set() for _ in buckets]

    def receive(k: int, node: Node) -> None:
        if node.inputs and stage_of[node.id] < k and node.id not in seen[k]:
            seen[k].add(node.id)
            received[k].append(node)

    for node in everything:
        for source in node.inputs:
            receive(stage_of[node.id], source)
    if late_updates:
        for value in updates.values():
            receive(last, value.node)
    sent: list[list[Node]] = [[] for _ in buckets]
    for k in range(len(buckets)):
        for node in received[k]:
            if node not in sent[stage_of[node.id]]:
                sent[stage_of[node.id]].append(node)

    stages = []
    for k in range(len(buckets)):
        copier = _Copier(Graph(f"{graph.name}-stage{k}"), {n.id for n in received[k]})
        tensor = copier.tensor
        outputs = [tensor(t.node) for t in heads] if k == 0 else []
        outputs.append(tensor(buckets[k].node))
        outputs += [tensor(n) for n in sent[k]]
        stage_updates: list[tuple[Variable, Tensor]] = []
        if (k == 0 and not late_updates) or (k == last and late_updates):
            stage_updates = [(v, tensor(t.node)) for v, t in updates.items()]
        program = compile(outputs, stage_updates, backend=backend, check_numerics=debug)
        stages.append(
            Stage(
                program,
                heads=len(heads) if k == 0 else 0,
                feeds=copier.feeds,
                received=[_boundary_name(n) for n in received[k]],
                sent=[_boundary_name(n) for n in sent[k]],
                shapes=copier.shapes,
            )
        )
    return stages


# The ids of the constant nodes that mark a cross-rank sum: ``local * marker`` (marker
# 1.0) is a sum over the ranks of ``local``, and so is the gradient autograd makes for
# it, ``cotangent * marker`` (the adjoint of a sum over ranks is a sum over ranks).
_MARKERS: set[int] = set()


def cross_rank_sum(local: Tensor) -> Tensor:
    """``local`` summed over the ranks inside a
    [`DistributedStep`][asgrad.nn.distributed.DistributedStep] (its gradient too);
    ``local`` itself in any other program (one process).

    The step splits its gradient program at these sums (`split_at_sums`).
    """
    marker = local.graph.constant(1.0, local.dtype)
    _MARKERS.add(marker.node.id)
    return local * marker


def _is_sum(node: Node) -> bool:
    return node.op == "mul" and len(node.inputs) == 2 and node.inputs[1].id in _MARKERS


def has_sums(roots: Sequence[Tensor]) -> bool:
    """Whether ``roots`` depend on a cross-rank sum (`cross_rank_sum`)."""
    return bool(_MARKERS) and any(_is_sum(n) for n in topological_order([t.node for t in roots]))


@dataclass
class SumStage:
    """One piece of a gradient program split at its cross-rank sums: it computes the
    values of one *phase* (the nodes behind as many sums), hands its sums' local values
    to be reduced over the ranks, and the values later stages read."""

    stage: Stage
    sums: list[str]  # boundary names whose values are summed over the ranks after it


def split_at_sums(
    roots: Sequence[Tensor],
    updates: Mapping[Variable, Tensor],
    *,
    backend: str | None,
    debug: bool | None,
) -> list[SumStage]:
    """Stages in phase order; the last outputs ``roots`` and applies ``updates``.

    A node's phase is the largest number of cross-rank sums on a path from a leaf to
    it: a sum's value is reduced over the ranks between its phase's stage and the
    next, so every rank runs the same stages and the same reductions in the same order.
    """
    graph = roots[0].graph
    ends = [t.node for t in roots] + [t.node for t in updates.values()]
    everything = topological_order(ends)
    if needs_retrace(ends) or not _splittable(everything, graph):
        raise DistributedError(
            "a graph with SyncBatchNorm cannot be split at its cross-rank sums (its"
            " expansions are specialised to the declared sizes, or it nests loop bodies)"
        )
    phase: dict[int, int] = {}
    for n in everything:
        phase[n.id] = max((phase[i.id] + (1 if _is_sum(i) else 0) for i in n.inputs), default=0)
    last = max(phase[n.id] for n in ends)
    received: list[list[Node]] = [[] for _ in range(last + 1)]
    seen: list[set[int]] = [set() for _ in range(last + 1)]

    def receive(k: int, node: Node) -> None:
        if node.inputs and phase[node.id] < k and node.id not in seen[k]:
            seen[k].add(node.id)
            received[k].append(node)

    for n in everything:
        if n.inputs:
            for source in n.inputs:
                receive(phase[n.id], source)
    for n in ends:
        receive(last, n)
    sent: list[list[Node]] = [[] for _ in range(last + 1)]
    for k in range(last + 1):
        for node in received[k]:
            if node not in sent[phase[node.id]]:
                sent[phase[node.id]].append(node)
    stages = []
    for k in range(last + 1):
        copier = _Copier(Graph(f"{graph.name}-phase{k}"), {n.id for n in received[k]})
        outputs = [copier.tensor(n) for n in sent[k]]
        stage_updates: list[tuple[Variable, Tensor]] = []
        if k == last:
            outputs = [copier.tensor(t.node) for t in roots] + outputs
            stage_updates = [(v, copier.tensor(t.node)) for v, t in updates.items()]
        program = compile(outputs, stage_updates, backend=backend, check_numerics=debug)
        stage = Stage(
            program,
            heads=len(roots) if k == last else 0,
            feeds=copier.feeds,
            received=[_boundary_name(n) for n in received[k]],
            sent=[_boundary_name(n) for n in sent[k]],
            shapes=copier.shapes,
        )
        sums = [_boundary_name(n) for n in sent[k] if _is_sum(n)]
        stages.append(SumStage(stage, sums))
    return stages
