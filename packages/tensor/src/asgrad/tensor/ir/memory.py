"""The planned memory of a schedule: live bytes at every step, and the peak by category.

A [`Schedule`][asgrad.tensor.Schedule] fixes the order of every node and the step at
which each value dies, so the bytes held at each step are known before anything
runs. `plan_memory` walks the schedule once: a value's buffer is taken at the step
that computes it and given back after its last use (a view's, such as a reshape's,
keeps its base's buffer alive and takes none of its own); variables' values, feeds
and constants are held for the whole step. The largest sum is the planned peak,
split into what holds it (`MemoryPlan`).

It is the model both backends follow: one buffer per value, freed at last use. The
CPU backend writes elementwise results into dying inputs and keeps scratch buffers
across runs, and the GPU backend fuses elementwise chains and rounds buffers up to
its pool's size classes, so their measured peaks stay within a margin of the plan
(stated, and tested, in ``docs/performance.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.passes import topological_order
from asgrad.tensor.ir.registry import TensorType

__all__ = [
    "BACKWARD_ROLES",
    "VIEW_OPS",
    "MemoryPlan",
    "format_bytes",
    "forward_ids",
    "last_uses",
    "plan_memory",
]

# Ops whose result is a view of their first input: no buffer of their own.
VIEW_OPS = frozenset(
    {"reshape", "transpose", "broadcast_to", "broadcast_like", "expand_dims", "squeeze"}
)
# Node roles (``node.meta["role"]``, see `asgrad.tensor.ir.scopes`) after the forward pass.
BACKWARD_ROLES = frozenset({"gradient", "optimizer", "recompute"})
_LEAVES = frozenset({"input", "parameter", "constant"})


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1.

    >>> format_bytes(512), format_bytes(3 * 2**20)
    ('512 B', '3.00 MiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class MemoryPlan:
    """A schedule's planned memory, in bytes.

    Attributes:
        peak: The most bytes held at once.
        parameters: Trainable variables' values (held throughout).
        state: Other variables' values: optimizer state, running statistics.
        inputs: Feeds and constants (held throughout).
        activations: At the peak, forward values kept for the backward pass (made
            before it; a value the backward makes from forward values, right before its
            reader, is a temporary).
        temporaries: At the peak, everything else: gradients, values in flight.
        peak_step: The index in the schedule's nodes of the step at the peak.
        live: The bytes held after each step computes its value.

    >>> from asgrad.tensor import Graph, compile
    >>> x = Graph().input("x", (256,))
    >>> plan = compile([(x * 2.0).exp()]).memory()
    >>> plan.peak, plan.inputs, plan.temporaries  # x, x * 2, its exp: 1 KiB; 2.0: 4 bytes
    (3076, 1028, 2048)
    """

    peak: int
    parameters: int
    state: int
    inputs: int
    activations: int
    temporaries: int
    peak_step: int
    live: list[int] = field(repr=False, default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """The peak and its categories by name."""
        return {
            "peak": self.peak,
            "parameters": self.parameters,
            "state": self.state,
            "inputs": self.inputs,
            "activations": self.activations,
            "temporaries": self.temporaries,
        }

    def __str__(self) -> str:
        rows = [f"Planned peak memory: {format_bytes(self.peak)}"]
        for name, value in self.as_dict().items():
            if name != "peak":
                rows.append(f"  {name}: {format_bytes(value)}")
        return "\n".join(rows)


def nbytes(t: TensorType) -> int:
    """The bytes of one value of type ``t``."""
    return math.prod(t.shape) * np.dtype(t.dtype).itemsize


def last_uses(nodes: Sequence[Node], roots: Sequence[Node]) -> dict[int, int]:
    """For each node id, the index in ``nodes`` of its last user; ``roots`` (outputs
    and update values) live to ``len(nodes)``."""
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for inp in node.inputs:
            last[inp.id] = i
    for root in roots:
        last[root.id] = len(nodes)
    return last


def forward_ids(nodes: Sequence[Node], roots: Sequence[Node]) -> set[int]:
    """The ids of the forward pass's nodes.

    Where any node is a gradient's, an update's or a recomputed copy (its
    ``meta["role"]``): what the first root (a step's loss) depends on, and what is
    computed from those values alone (no leaf, not the loss): a gradient rule's
    transpose of an activation, or the normalized input a layer norm's rule
    recomputes. Such values can be made again right before the backward reads them
    (`asgrad.tensor.ir.remat`). Decided by the graph, not by each node's role: the
    passes merge a forward value and its twin in a gradient into one node, whose role
    is whichever came first. Without gradients, every node is forward.
    """
    if not roots or not any(n.meta.get("role") in BACKWARD_ROLES for n in nodes):
        return {n.id for n in nodes}
    ancestors = topological_order(roots[:1])
    forward = {n.id for n in ancestors}
    derived = {n.id for n in ancestors if n.op not in _LEAVES} - {roots[0].id}
    for node in nodes:
        if node.id not in forward and node.inputs and all(i.id in derived for i in node.inputs):
            forward.add(node.id)
            derived.add(node.id)
    return forward


def plan_memory(
    nodes: Sequence[Node],
    roots: Sequence[Node],
    types: Mapping[int, TensorType] | None = None,
    forward: set[int] | None = None,
) -> MemoryPlan:
    """The planned memory of computing ``nodes`` in order, ``roots`` kept to the end.

    ``types`` gives each node's type at the fed shapes (default: the declared ones);
    ``forward`` the forward pass's ids where the caller knows them (`forward_ids`).
    """
    type_of = (lambda n: types[n.id]) if types is not None else (lambda n: n.type)
    last = last_uses(nodes, roots)
    end = len(nodes)
    owner: dict[int, int] = {}  # value -> the value whose buffer holds it
    size: dict[int, int] = {}
    death: dict[int, int] = {}  # buffer owner -> the step after which it is freed
    parameters = state = inputs = 0
    if forward is None:
        forward = forward_ids(nodes, roots)
    first_backward = next((i for i, n in enumerate(nodes) if n.id not in forward), end)
    forward_values: set[int] = set()
    for i, node in enumerate(nodes):
        if node.op in _LEAVES:
            owner[node.id] = node.id
            b = nbytes(type_of(node))
            if node.op == "parameter":
                if node.attrs["variable"].trainable:
                    parameters += b
                else:
                    state += b
            else:
                inputs += b
            continue
        if node.op in VIEW_OPS and node.inputs:
            base = owner[node.inputs[0].id]
            owner[node.id] = base
            if base in death:
                death[base] = max(death[base], last.get(node.id, i))
            continue
        owner[node.id] = node.id
        size[node.id] = nbytes(type_of(node))
        death[node.id] = max(death.get(node.id, i), last.get(node.id, i))
        if node.id in forward:
            forward_values.add(node.id)
    frees: dict[int, list[int]] = {}
    for value, step in death.items():
        frees.setdefault(step, []).append(value)
    persistent = parameters + state + inputs
    held = persistent
    live: list[int] = []
    peak, peak_step = persistent, -1
    for i, node in enumerate(nodes):
        held += size.get(node.id, 0)
        live.append(held)
        if held > peak:
            peak, peak_step = held, i
        for value in frees.get(i, ()):
            held -= size[value]
    activations = temporaries = 0
    if peak_step >= 0:
        position = {n.id: i for i, n in enumerate(nodes)}
        for value, b in size.items():
            if position[value] <= peak_step <= death[value]:
                kept = (
                    value in forward_values
                    and position[value] < first_backward
                    and death[value] >= first_backward
                )
                if kept and peak_step >= first_backward:
                    activations += b
                else:
                    temporaries += b
    return MemoryPlan(peak, parameters, state, inputs, activations, temporaries, peak_step, live)
