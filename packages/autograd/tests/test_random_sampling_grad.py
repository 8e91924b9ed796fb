"""Gradients through samples: ``normal`` is reparameterised, the draw itself is constant."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Graph, compile, normal, randn_like
from asgrad.tensor.ops.random import normal_from_seed


def test_normal_passes_gradients_to_mean_and_std() -> None:
    g = Graph()
    mean, std = g.input("mean", (3, 4), "float64"), g.input("std", (3, 4), "float64")
    loss = (normal(mean, std, seed=5) ** 2).sum()
    gm, gs = grad(loss, [mean, std])
    m = np.linspace(-1, 1, 12).reshape(3, 4)
    s = np.linspace(0.5, 2, 12).reshape(3, 4)
    got_m, got_s = compile([gm, gs])(mean=m, std=s)
    eps = normal_from_seed((3, 4), 5)
    np.testing.assert_allclose(got_m, 2 * (m + s * eps), rtol=1e-12)
    np.testing.assert_allclose(got_s, 2 * (m + s * eps) * eps, rtol=1e-12)


def test_numerical_gradient_with_a_fixed_seed() -> None:
    def f(mean, std):  # type: ignore[no-untyped-def]
        return (normal(mean, std.exp(), seed=3) * mean).sum()

    rng = np.random.default_rng(0)
    gradient_check(f, [rng.standard_normal((2, 5)), rng.standard_normal((2, 5))])


def test_the_draw_has_no_gradient_to_its_shape_source() -> None:
    g = Graph()
    x = g.input("x", (4,), "float64")
    (gx,) = grad((randn_like(x, seed=1) * 3.0).sum(), [x])
    np.testing.assert_array_equal(compile([gx])(x=np.ones(4))[0], np.zeros(4))
