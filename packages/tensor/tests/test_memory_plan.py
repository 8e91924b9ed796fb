"""The planned memory of a program (Program.memory) against hand counts and numpy runs."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from asgrad.tensor import Graph, MemoryBudgetError, compile
from asgrad.tensor.ir.memory import VIEW_OPS, plan_memory
from asgrad.tensor.ir.registry import all_ops

KIB = 1024


def test_plan_counts_each_value_from_its_step_to_its_last_use() -> None:
    x = Graph().input("x", (256,))
    a = x.exp()  # 1 KiB, dies at c
    b = a * 2.0  # 1 KiB, dies at d
    c = a + b  # 1 KiB
    d = (b * c).sum()
    plan = compile([d]).memory()
    # x, a, b and c are all held when c is made: 4 KiB, plus the 4-byte constant 2.0
    assert plan.peak == 4 * KIB + 4
    assert plan.inputs == KIB + 4
    assert plan.temporaries == 3 * KIB
    assert plan.peak_step == [n.op for n in compile([d]).schedule.nodes].index("add")


def test_views_hold_their_base_and_take_no_buffer() -> None:
    x = Graph().input("x", (16, 16))
    y = x.exp()
    t = y.transpose()  # a view of y: y is held until t's last use
    z = (t * 3.0).sum()
    plan = compile([z]).memory()
    assert plan.peak == 3 * KIB + 4  # x, y (through t) and t * 3.0; no buffer for t


def test_view_ops_name_registered_ops() -> None:
    names = {op.name for op in all_ops()}
    assert names >= VIEW_OPS


def test_plan_at_fed_shapes_follows_free_axes() -> None:
    x = Graph().input("x", (4, 64))  # axis 0 is free
    program = compile([(x * 2.0).exp()])
    declared = program.memory()
    doubled = program.memory(x=np.zeros((8, 64), np.float32))
    assert doubled.inputs - 4 == 2 * (declared.inputs - 4)
    assert doubled.peak - 4 == 2 * (declared.peak - 4)


def test_parameters_and_state_are_held_throughout() -> None:
    g = Graph()
    w = g.parameter("w", (32, 32), init=np.ones((32, 32), np.float32))
    s = g.parameter("s", (8,), init=np.zeros(8, np.float32), trainable=False)
    x = g.input("x", (4, 32))
    plan = compile([(x @ w).sum() + s.sum()]).memory()
    assert plan.parameters == 32 * 32 * 4
    assert plan.state == 8 * 4


def _measured_transient(program: object, feeds: dict[str, np.ndarray]) -> int:
    """Bytes numpy allocates at the peak of one run, after a first run made the function,
    plus the scratch buffers the function holds between runs."""
    program(feeds)  # type: ignore[operator]  # a Program
    tracemalloc.start()
    try:
        program(feeds)  # type: ignore[operator]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(peak) + int(program.executable.scratch_bytes(feeds))  # type: ignore[attr-defined]


def _chain(length: int) -> tuple[Graph, object]:
    g = Graph()
    x = g.input("x", (64, 256))
    w = g.parameter("w", (256, 256), init=np.full((256, 256), 0.01, np.float32))
    h = x
    for _ in range(length):
        h = (h @ w).tanh()
    return g, (h * h).sum()


def test_measured_cpu_peak_without_buffer_reuse_is_the_plan_within_ten_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASGRAD_CPU_REUSE", "0")
    _, loss = _chain(6)
    program = compile([loss])  # type: ignore[list-item]
    plan = program.memory()
    feeds = {"x": np.ones((64, 256), np.float32)}
    planned = plan.peak - plan.parameters - plan.state - plan.inputs
    measured = _measured_transient(program, feeds)
    assert 0.9 * planned <= measured <= 1.1 * planned


def test_budget_below_every_plan_raises_naming_the_smallest_peak() -> None:
    x = Graph().input("x", (1024,))
    with pytest.raises(MemoryBudgetError, match=r"smallest planned peak reached is 8\.00 KiB"):
        compile([x.exp()], memory_budget=1000)


def test_budget_above_the_plan_changes_nothing() -> None:
    _, loss = _chain(3)
    free = compile([loss])  # type: ignore[list-item]
    budgeted = compile([loss], memory_budget=10 * free.memory().peak)  # type: ignore[list-item]
    assert [n.op for n in budgeted.schedule.nodes] == [n.op for n in free.schedule.nodes]


def test_plan_memory_of_an_empty_schedule_is_its_leaves() -> None:
    x = Graph().input("x", (8,))
    plan = plan_memory([x.node], [x.node])
    assert (plan.peak, plan.inputs, plan.peak_step) == (32, 32, -1)


def test_a_value_made_in_the_backward_from_forward_values_is_no_activation() -> None:
    # e = exp(x) is kept for the backward; w = exp(e) reads forward values alone but is
    # made in the backward, right before its reader: a temporary at the peak, not kept
    from asgrad.tensor.ir.scopes import node_meta

    g = Graph()
    x = g.input("x", (256,))
    e = x.exp()
    loss = e.sum()
    with node_meta(role="gradient"):
        seed = loss * 2.0
        w = e.exp()
        grad = (w * e) * seed
    order = [x, e, loss, seed, w, w * e, grad]
    nodes = []
    for t in order:  # each value after its inputs (constants where first read)
        nodes += [i for i in t.node.inputs if i.op == "constant" and i not in nodes]
        nodes.append(t.node)
    nodes[-2] = grad.node.inputs[0]  # the product grad reads
    plan = plan_memory(nodes, [loss.node, grad.node])
    assert plan.activations == KIB + 4  # e and the loss: made in the forward, read after
    assert plan.temporaries >= 2 * KIB  # w and w * e at the peak
