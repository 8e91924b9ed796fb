"""``stop_gradient`` (``Tensor.detach``): the value passes, the gradient does not."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Graph, compile, evaluate, stop_gradient


def test_the_value_passes_and_no_gradient_flows() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    y = x * x + stop_gradient(x * x) * x
    (dx,) = grad(y.sum(), [x])
    feed = {"x": np.array([1.0, -2.0, 3.0])}
    value, slope = evaluate([y, dx], feed)
    v = feed["x"]
    np.testing.assert_allclose(value, v**2 + v**3)
    np.testing.assert_allclose(slope, 2 * v + v**2)  # d/dx of x*x, plus the frozen x*x


def test_second_derivatives_see_the_stop_too() -> None:
    g = Graph()
    x = g.input("x", (2,), "float64")
    y = (x.detach() * x * x).sum()
    (dx,) = grad(y, [x])
    (d2x,) = grad(dx.sum(), [x])
    (second,) = evaluate([d2x], {"x": np.array([2.0, 5.0])})
    np.testing.assert_allclose(second, 2 * np.array([2.0, 5.0]))


def test_compiled_programs_drop_the_node() -> None:
    g = Graph()
    x = g.input("x", (2,))
    program = compile([stop_gradient(x) * 2.0])
    assert "stop_gradient" not in {n.op for n in program.schedule.nodes}
