"""Planning a deep graph: the fusion analysis walks it without recursion.

Regression: a chain of thousands of adds (the graph viewer's 10,000-node test) made
the scatter-sum search recurse once per add and exceed Python's recursion limit.
"""

from __future__ import annotations

from asgrad.gpu.plan import inlined_nodes, users_of
from asgrad.tensor import Graph, Tensor
from asgrad.tensor.ir.schedule import make_schedule


def test_a_chain_of_five_thousand_adds_is_planned() -> None:
    g = Graph("deep")
    x = g.input("x", (4,))
    y: Tensor = x
    for _ in range(5000):
        y = y + x
    schedule = make_schedule([y])
    users = users_of(schedule)
    inlined = inlined_nodes(schedule, users, schedule.infer_types({}))
    assert len(inlined) > 4000  # the adds are one fused expression's parts


def test_slices_summed_by_a_deep_tree_of_adds_are_found() -> None:
    g = Graph("pieces")
    x = g.input("x", (8, 6))
    total: Tensor = x[:, 0:2] * 1.0
    for _ in range(3000):
        total = total + x[:, 0:2]
    schedule = make_schedule([total])
    inlined_nodes(schedule, users_of(schedule), schedule.infer_types({}))
