"""precision="mixed": the graph pass's casts, op by op, and what it leaves alone."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, Tensor, compile, evaluate, scan, topological_order
from asgrad.tensor.api.precision import mixed_precision, with_precision
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.variables import Variable


def _dtypes(root: Tensor) -> dict[str, list[str]]:
    """Each op's output dtypes, in graph order."""
    out: dict[str, list[str]] = {}
    for node in topological_order([root.node]):
        out.setdefault(node.op, []).append(node.dtype)
    return out


def test_matmuls_and_what_follows_them_run_in_float16_sums_and_softmax_in_float32() -> None:
    g = Graph()
    x = g.input("x", (4, 3))
    w = Variable("w", np.ones((3, 5), np.float32))
    b = Variable("b", np.zeros(5, np.float32))
    y = g.input("y", (4, 5))
    h = (x @ g.bind(w) + g.bind(b)).relu()  # float16: product, bias add, relu
    p = h.softmax(axis=-1)  # float32
    loss = ((p - y) ** 2.0).mean()
    [mixed], _ = mixed_precision([loss])
    ops = _dtypes(mixed)
    assert ops["matmul"] == ["float16"]
    assert ops["relu"] == ["float16"]
    assert ops["softmax"] == ["float32"]
    assert ops["mean"] == ["float32"]
    assert ops["pow"] == ["float32"]
    assert ops["add"] == ["float16"]  # the float32 bias is cast to the product's dtype
    assert ops["sub"] == ["float32"]  # a float32 op's output minus a fed float32 target
    # x and w cast down for the product, b for the add, relu's output up for softmax
    assert sorted(ops["cast"]) == ["float16", "float16", "float16", "float32"]
    # the weights stay float32 variables: their parameter nodes are read through casts
    params = [n for n in topological_order([mixed.node]) if n.op == "parameter"]
    assert {n.dtype for n in params} == {"float32"}


def test_outputs_and_updates_keep_their_dtypes() -> None:
    g = Graph()
    x = g.input("x", (2, 2))
    v = Variable("v", np.zeros((2, 2), np.float32), trainable=False)
    [out], updates = mixed_precision([x @ x], {v: (x @ x).tanh()})
    assert out.dtype == "float32"
    assert out.node.op == "cast"
    assert updates[v].dtype == "float32"
    assert updates[v].node.inputs[0].op == "tanh"
    assert updates[v].node.inputs[0].dtype == "float16"


def test_a_loop_body_stays_float32() -> None:
    g = Graph()
    x = g.input("x", (4, 4))
    hs = (x @ x).tanh()  # float16 under the pass
    total, _ = scan(lambda c, e: (c + e, c), g.constant(np.zeros(4, np.float32)), hs)
    [mixed], _ = mixed_precision([total])
    nodes = topological_order([mixed.node])
    assert "float16" in [n.dtype for n in nodes if n.op == "tanh"]
    scans = [n for n in nodes if n.op.startswith("scan")]
    assert scans
    assert all(i.dtype != "float16" for n in scans for i in n.inputs)
    feeds = {"x": np.eye(4, dtype=np.float32)}
    np.testing.assert_allclose(evaluate(mixed, feeds)[0], evaluate(total, feeds)[0], rtol=1e-3)


def test_float32_precision_changes_nothing() -> None:
    g = Graph()
    x = g.input("x", (2, 2))
    outs = [x @ x]
    new, updates = with_precision(outs, {}, "float32")
    assert new[0] is outs[0]
    assert updates == {}
    program = compile(outs, precision="float32")
    assert [n.op for n in program.schedule.nodes] == [n.op for n in compile(outs).schedule.nodes]


def test_a_mixed_program_computes_close_to_float32() -> None:
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (8, 16))
    w = Variable("w", rng.standard_normal((16, 4)).astype(np.float32) * 0.25)
    out = (x @ g.bind(w)).tanh().mean()
    feeds = {"x": rng.standard_normal((8, 16)).astype(np.float32)}
    exact = evaluate(out, feeds)[0]
    mixed = compile([out], precision="mixed").run(feeds)[0]
    assert mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, exact, rtol=0, atol=2e-3)  # float16: 11 bits


def test_an_unknown_precision_is_refused() -> None:
    g = Graph()
    with pytest.raises(ArgumentError, match="precision must be one of"):
        compile([g.input("x", (2,)) * 2.0], precision="bfloat16")


def test_a_constant_float16_cannot_hold_promotes_its_reader_to_float32() -> None:
    g = Graph()
    x = g.input("x", (2, 2))
    mask = np.array([[0.0, -1e9], [0.0, 0.0]], np.float32)  # an attention mask's -1e9
    with np.errstate(over="raise"):  # casting -1e9 to float16 would overflow
        [masked], _ = mixed_precision([(x @ x) + g.constant(mask)])
        [scaled], _ = mixed_precision([(x @ x) * g.constant(np.float32(0.5))])
        ops = _dtypes(masked)
        assert ops["add"] == ["float32"]  # the float16 product cast up, the mask kept
        assert _dtypes(scaled)["mul"] == ["float16"]  # a constant that fits is cast down
        out = evaluate([masked], {"x": np.ones((2, 2), np.float32)})[0]
    np.testing.assert_array_equal(out, np.float32([[2.0, -1e9 + 2.0], [2.0, 2.0]]))
