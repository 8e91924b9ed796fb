"""Gradients of a graph traced again at the sizes fed (`asgrad.tensor.ir.retrace`).

An op built for the declared size of a free axis (``roll`` along the batch) is built
again at the size fed; so is the gradient that reads it: ``grad`` is recorded and
differentiates the graph built again.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_an_op_built_again_is_built_again(backend: str) -> None:
    g = Graph()
    x = g.input("x", (4, 3))
    w = g.parameter("w", (3,), init=np.array([1.0, -2.0, 0.5], np.float32))
    y = x.roll(1, 0).tril(0) * w
    dx, dw = grad((y * y).sum(), [x, w])
    for n in (4, 2, 7):
        fed = np.arange(3 * n, dtype=np.float32).reshape(n, 3) / 5
        got = evaluate([y, dx, dw], {"x": fed}, backend=backend)
        r = np.tril(np.roll(fed, 1, 0)) * w.node.attrs["variable"].value
        np.testing.assert_allclose(got[0], r, rtol=1e-5)
        back = np.roll(np.tril(2 * r * w.node.attrs["variable"].value), -1, 0)
        np.testing.assert_allclose(got[1], back, rtol=1e-5)
        np.testing.assert_allclose(got[2], (2 * r * np.tril(np.roll(fed, 1, 0))).sum(0), rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_a_slice_of_a_free_input_follows_the_size_fed(backend: str) -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    (dx,) = grad((x[:, 1:3] * x[:, 1:3]).sum() + x[1:3].sum(), [x])
    for n in (4, 3, 6):
        fed = np.arange(5 * n, dtype=np.float32).reshape(n, 5)
        want = np.zeros_like(fed)
        want[:, 1:3] = 2 * fed[:, 1:3]
        want[1:3] += 1
        (got,) = evaluate([dx], {"x": fed}, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-6)
