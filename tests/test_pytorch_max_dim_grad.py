"""The gradient of ``x.max(dim=...)``/``x.min(dim=...)`` flows through the values (the
indices are integers, not differentiable)."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate


def test_gradient_flows_through_the_values_of_max_and_min_over_dim() -> None:
    v = np.array([[1.0, 7.0, 3.0], [5.0, -1.0, 0.5]])
    g = Graph()
    x = g.input("x", v.shape, "float64")
    hi, _ = x.max(dim=1)
    lo = x.min(dim=0, keepdim=True).values
    loss = (hi * g.constant(np.array([2.0, 3.0])).cast("float64")).sum() + lo.sum()
    (dx,) = evaluate(grad(loss, [x]), {"x": v})
    want = np.zeros_like(v)
    want[0, 1], want[1, 0] = 2.0, 3.0
    want[0, 0] += 1.0
    want[1, 1] += 1.0
    want[1, 2] += 1.0
    np.testing.assert_array_equal(dx, want)
