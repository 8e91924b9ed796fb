"""scan, fori_loop and while_loop: values against numpy loops, shapes, errors, passes."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import (
    DTypeError,
    Graph,
    GraphError,
    ShapeError,
    compile,
    evaluate,
    fori_loop,
    scan,
    while_loop,
)

RNG = np.random.default_rng(0)


def _rnn_numpy(h: np.ndarray, xs: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ys = []
    for x in xs:
        h = np.tanh(h @ w + x)
        ys.append(h.sum(axis=-1))
    return h, np.stack(ys)


def test_scan_with_a_captured_weight_matches_a_numpy_loop() -> None:
    g = Graph()
    h0 = g.input("h0", (2, 3), "float64")
    xs = g.input("xs", (5, 2, 3), "float64", free=())
    w = g.input("w", (3, 3), "float64", free=())

    def step(h, x):
        new = (h @ w + x).tanh()
        return new, new.sum(axis=-1)

    h, ys = scan(step, h0, xs)
    feeds = {"h0": RNG.standard_normal((2, 3)), "xs": RNG.standard_normal((5, 2, 3))}
    feeds["w"] = RNG.standard_normal((3, 3))
    got_h, got_ys = evaluate([h, ys], feeds)
    want_h, want_ys = _rnn_numpy(feeds["h0"], feeds["xs"], feeds["w"])
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12)
    np.testing.assert_allclose(got_ys, want_ys, rtol=1e-12)
    assert h.shape == (2, 3)
    assert ys.shape == (5, 2)


def test_a_free_batch_axis_changes_the_body_shapes_at_run_time() -> None:
    g = Graph()
    h0 = g.input("h0", (2, 3), "float64")  # axis 0 free
    xs = g.input("xs", (4, 2, 3), "float64", free=(0, 1))
    w = g.input("w", (3, 3), "float64", free=())
    h, ys = scan(lambda h, x: ((h @ w + x).tanh(), (h @ w + x).tanh().sum(axis=-1)), h0, xs)
    prog = compile([h, ys])
    for batch, steps in ((2, 4), (7, 3), (1, 6)):
        feeds = {"h0": RNG.standard_normal((batch, 3)), "w": RNG.standard_normal((3, 3))}
        feeds["xs"] = RNG.standard_normal((steps, batch, 3))
        got_h, got_ys = prog(feeds)
        want_h, want_ys = _rnn_numpy(feeds["h0"], feeds["xs"], feeds["w"])
        np.testing.assert_allclose(got_h, want_h, rtol=1e-12)
        np.testing.assert_allclose(got_ys, want_ys, rtol=1e-12)


def test_tuples_of_carries_and_ys_reverse_and_no_xs() -> None:
    g = Graph()
    a0 = g.input("a", (3,), "float64", free=())
    b0 = g.input("b", (3,), "float64", free=())
    xs = g.input("xs", (4, 3), "float64", free=())
    (a, b), (p, q) = scan(
        lambda c, x: ((c[0] + x, c[1] * x), (c[0] * 1.0, c[1] + c[0])), (a0, b0), xs, reverse=True
    )
    fa, fb, fx = RNG.standard_normal(3), RNG.standard_normal(3), RNG.standard_normal((4, 3))
    got = evaluate([a, b, p, q], {"a": fa, "b": fb, "xs": fx})
    ca, cb, ps, qs = fa.copy(), fb.copy(), [None] * 4, [None] * 4
    for t in range(3, -1, -1):
        ps[t], qs[t] = ca.copy(), cb + ca
        ca, cb = ca + fx[t], cb * fx[t]
    for have, want in zip(got, [ca, cb, np.stack(ps), np.stack(qs)], strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-12)
    # no xs: length steps, y None
    total, none = scan(lambda c, _: (c * 2.0, None), a0, length=5)
    assert none is None
    np.testing.assert_allclose(evaluate([total], {"a": fa})[0], fa * 32)


def test_fori_loop_and_while_loop() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64", free=())
    out = fori_loop(2, 6, lambda i, v: v * 0.5 + i.cast("float64"), x)
    fx = RNG.standard_normal(3)
    want = fx.copy()
    for i in range(2, 6):
        want = want * 0.5 + i
    np.testing.assert_allclose(evaluate([out], {"x": fx})[0], want, rtol=1e-12)
    doubled = while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, x, max_steps=50)
    start = np.array([1.0, 2.0, 3.0])
    got = evaluate([doubled], {"x": start})[0]
    np.testing.assert_allclose(got, start * 32)  # 6 * 16 = 96 < 100, then 192
    capped = while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, x, max_steps=3)
    np.testing.assert_allclose(evaluate([capped], {"x": start})[0], start * 8)


def test_nested_scan_captures_through_two_bodies() -> None:
    g = Graph()
    w = g.input("w", (2,), "float64", free=())
    xs = g.input("xs", (3, 4, 2), "float64", free=())

    def outer(c, row):
        inner, _ = scan(lambda d, x: (d + x * w, None), c, row)
        return inner, inner.sum()

    c, sums = scan(outer, g.constant(np.zeros(2), "float64"), xs)
    fw, fx = RNG.standard_normal(2), RNG.standard_normal((3, 4, 2))
    got_c, got_s = evaluate([c, sums], {"w": fw, "xs": fx})
    acc, want_s = np.zeros(2), []
    for row in fx:
        for x in row:
            acc = acc + x * fw
        want_s.append(acc.sum())
    np.testing.assert_allclose(got_c, acc, rtol=1e-12)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-12)


def test_errors_name_the_body_line() -> None:
    g = Graph()
    h0 = g.input("h0", (2, 3))
    xs = g.input("xs", (5, 2, 4), free=())

    def bad_matmul(h, x):
        return h @ x, None  # (2, 3) @ (2, 4)

    with pytest.raises(ShapeError, match=r"test_scan.py:\d+") as info:
        scan(bad_matmul, h0, xs)
    line = bad_matmul.__code__.co_firstlineno + 1
    assert f"test_scan.py:{line}" in str(info.value)

    def grows(h, x):
        return h.sum(axis=0), None

    with pytest.raises(ShapeError, match=r"carry 0 as float32\[3\].*keeps its shape") as info:
        scan(grows, h0, xs)
    assert f"test_scan.py:{grows.__code__.co_firstlineno}" in str(info.value)

    def mixed(h, x):
        return h, h.cast("float64")

    with pytest.raises(DTypeError, match="share one dtype"):
        scan(mixed, h0, g.input("x2", (5, 2, 3), free=()))

    leaked = []

    def leak(h, x):
        leaked.append(h * 2.0)
        return h, None

    scan(leak, h0, xs)
    with pytest.raises(GraphError, match="outside the body"):
        _ = leaked[0] + h0
    with pytest.raises(GraphError, match="cannot declare inputs"):
        scan(lambda h, x: (g_body_input(h), None), h0, xs)


def g_body_input(h):
    return h + h.graph.input("z", (3,))


def test_passes_printing_and_common_subexpressions() -> None:
    g = Graph()
    h0 = g.input("h0", (2, 3), "float64")
    xs = g.input("xs", (4, 2, 3), "float64", free=())
    h, _ = scan(lambda h, x: ((h + x) * (2.0 + 1.0), None), h0, xs)
    listing = g.dump([h])
    assert "scan(%h0, %xs, loop=<body <lambda> at" in listing
    assert "scan_part" in listing
    assert "  body <lambda> -> (%" in listing  # the body, nested under its scan
    assert "    %carry0: float64[2, 3] = input" in listing
    dot = g.to_dot([h])
    assert "subgraph cluster_" in dot
    assert "[style=dashed]" in dot
    # the same node used twice is computed once; the body's constant 2+1 is folded
    both = h + h
    prog = compile([both])
    assert sum(n.op == "scan" for n in prog.schedule.nodes) == 1
    body = prog.schedule.nodes[[n.op for n in prog.schedule.nodes].index("scan")].attrs["loop"]
    assert not any(
        n.op == "add" and all(i.op == "constant" for i in n.inputs) for n in body.schedule().nodes
    )
    fh, fx = RNG.standard_normal((2, 3)), RNG.standard_normal((4, 2, 3))
    want = fh
    for x in fx:
        want = (want + x) * 3.0
    np.testing.assert_allclose(prog({"h0": fh, "xs": fx})[0], 2 * want, rtol=1e-12)


def test_values_of_unrelated_graphs_and_bad_conditions_are_refused() -> None:
    g, other = Graph(), Graph("other")
    h0 = g.input("h0", (3,))
    xs = g.input("xs", (4, 3), free=())
    stranger = other.input("w", (3,))
    with pytest.raises(GraphError, match="belongs to graph 'other'"):
        scan(lambda h, x: (h * stranger + x, None), h0, xs)
    with pytest.raises(DTypeError, match="bool scalar"):
        while_loop(lambda v: v.sum(), lambda v: v * 2.0, h0, max_steps=3)
    with pytest.raises(GraphError, match="must return \\(carry, y\\)"):
        scan(lambda h, x: h + x, h0, xs)
