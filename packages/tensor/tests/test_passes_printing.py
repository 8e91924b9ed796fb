"""Graph passes (CSE, DCE, constant folding, identities) and the text/DOT dumps."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from asgrad.tensor import Graph, Node, compile, dump, make_schedule, optimize, to_dot


def _ops(nodes: list[Node]) -> Counter[str]:
    return Counter(n.op for n in nodes)


def test_cse_merges_duplicate_subexpressions() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    y = x.exp() * 2.0 + x.exp() * 2.0
    optimized = make_schedule([y]).nodes
    plain = make_schedule([y], optimize_graph=False).nodes
    assert _ops(plain)["exp"] == 2
    assert _ops(plain)["mul"] == 2
    assert _ops(plain)["constant"] == 2
    assert _ops(optimized)["exp"] == 1
    assert _ops(optimized)["mul"] == 1
    assert _ops(optimized)["constant"] == 1
    assert len(optimized) == 5  # x, exp, 2.0, mul, add
    X = np.array([0.0, 1.0, -1.0])
    np.testing.assert_allclose(compile([y])({"x": X})[0], 4 * np.exp(X))


def test_cse_keeps_different_attributes_apart() -> None:
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    y = x.sum(axis=0).sum() + x.sum(axis=1).sum() + x.sum(axis=1, keepdims=True).sum()
    assert _ops(make_schedule([y]).nodes)["sum"] == 6


def test_dce_drops_unused_nodes() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    unused_input = g.input("unused", (3,), "float64")
    used = x.sin()
    _dead = (x.cos() + unused_input).exp()
    schedule = make_schedule([used])
    assert [n.op for n in schedule.nodes] == ["input", "sin"]
    assert [n.name for n in schedule.inputs] == ["x"]
    assert len(g) == 6  # the user's graph is untouched
    # An unused input need not be fed.
    np.testing.assert_allclose(compile([used])({"x": np.zeros(3)})[0], np.zeros(3))


def test_constant_folding() -> None:
    g = Graph()
    x = g.input("x", (2,), "float64")
    c = (g.constant(2.0, "float64") * g.constant(3.0, "float64")).exp()
    y = x + c
    nodes = make_schedule([y]).nodes
    assert _ops(nodes) == Counter({"input": 1, "constant": 1, "add": 1})
    (folded,) = (n for n in nodes if n.op == "constant")
    assert float(folded.attrs["value"]) == np.exp(6.0)
    unfolded, _ = optimize([y.node], fold_constants=False)
    assert _ops(unfolded)["mul"] == 1
    assert _ops(unfolded)["exp"] == 1


def test_identity_cast_is_dropped_and_a_fixed_reshape_kept() -> None:
    # A cast to the same dtype is one at every shape; a reshape to a fixed shape is
    # one only at the declared shape (fed another batch it reshapes), so the graph
    # keeps it and the CPU backend drops it at the fed shapes.
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    y = g.apply("reshape", [x], {"shape": (2, 3)}).sin()
    z = g.apply("cast", [y], {"dtype": "float64"})
    assert [n.op for n in make_schedule([z]).nodes] == ["input", "reshape", "sin"]


def test_dump_lists_nodes_types_and_inputs() -> None:
    g = Graph("demo")
    x = g.input("x", (3, 4))
    w = g.parameter("w", (4, 5))
    y = (x @ w).tanh().sum(axis=1)
    text = dump(g, [y])
    assert text.splitlines()[0] == "graph 'demo'"
    assert "%x: float32[3, 4] = input" in text
    assert "%w: float32[4, 5] = parameter" in text
    assert re.search(r"%matmul_\d+: float32\[3, 5\] = matmul\(%x, %w\)", text)
    assert re.search(r"%tanh_\d+: float32\[3, 5\] = tanh\(%matmul_\d+\)", text)
    assert re.search(r"= sum\(%tanh_\d+, axis=\(1,\), keepdims=False\)", text)
    assert g.dump() == dump(g)  # the whole graph: same nodes here


def test_to_dot_has_every_node_and_edge() -> None:
    g = Graph("demo")
    x = g.input("x", (3, 4))
    w = g.parameter("w", (4, 5))
    m = x @ w
    y = m.tanh()
    dot = to_dot(g, [y])
    assert dot.startswith('digraph "demo" {')
    assert dot.rstrip().endswith("}")
    for node in (x.node, w.node, m.node, y.node):
        assert f"n{node.id} [label=" in dot
        assert node.name in dot
    for src, dst in ((x, m), (w, m), (m, y)):
        assert f"n{src.node.id} -> n{dst.node.id};" in dot
    assert dot.count("->") == 3
    assert f'n{x.node.id} [label="x\\ninput\\nfloat32[3, 4]", shape=ellipse]' in dot
    assert "shape=box" in dot  # the parameter
