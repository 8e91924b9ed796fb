"""The viewer's GPU fusion groups: computed from the GPU planner's inlining
rules at the declared shapes, with no GPU needed."""

from __future__ import annotations

from asgrad.gpu.plan import inlined_nodes, users_of
from asgrad.tensor import Graph, compile
from asgrad.viz.data import page_data, subject_of
from asgrad.viz.fusion import fusion_groups


def test_an_elementwise_chain_is_one_group() -> None:
    g = Graph()
    x = g.input("x", (4, 8))
    w = g.parameter("w", (8, 8))
    b = g.parameter("b", (8,))
    y = ((x @ w + b).sigmoid() * 2.0).sum(axis=1)
    program = compile([y])
    groups = fusion_groups(program.schedule, [])
    schedule = program.schedule
    inlined = inlined_nodes(schedule, users_of(schedule), schedule.infer_types({}))
    assert inlined  # the add, sigmoid and mul are inlined into the sum's kernel
    assert {n.name for n in schedule.nodes if n.id in inlined} <= set(groups)
    ops = {n.op for n in schedule.nodes if n.name in groups}
    assert {"add", "sigmoid", "mul"} <= ops
    data = page_data(subject_of(program), fusion=groups)
    assert data["fusion"] is True
    marked = [n for n in data["views"]["after"]["nodes"] if "fusion" in n]
    assert len({n["fusion"] for n in marked}) == len(set(groups.values()))
