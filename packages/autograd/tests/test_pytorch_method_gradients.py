"""Gradients of the Tensor methods under PyTorch's names that are compositions of ops
(``log1p``, ``norm``): finite where PyTorch's are, and PyTorch's values."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate


def test_log1p_gradient_is_one_over_one_plus_x_near_zero_too() -> None:
    g = Graph()
    x = g.input("x", (4,), "float64")
    v = np.array([0.0, 1e-17, -0.5, 2.0])
    (dx,) = evaluate(grad(x.log1p().sum(), [x]), {"x": v})
    np.testing.assert_allclose(dx, 1.0 / (1.0 + v), rtol=1e-12)


def test_norm_gradient_is_x_over_norm_and_zero_at_zero() -> None:
    g = Graph()
    x = g.input("x", (2, 3), "float64")
    v = np.array([[3.0, 0.0, 4.0], [0.0, 0.0, 0.0]])
    (dx,) = evaluate(grad(x.norm(dim=1).sum(), [x]), {"x": v})
    np.testing.assert_allclose(dx, [[0.6, 0.0, 0.8], [0.0, 0.0, 0.0]])
