"""Higher-order gradients (grad of grad) against finite differences."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, compile, evaluate

X = np.linspace(-1.7, 1.9, 9)


def _second_difference(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    h = 1e-4
    return np.asarray((f(x + h) - 2.0 * f(x) + f(x - h)) / (h * h))


@pytest.mark.parametrize(
    ("build", "f", "exact"),
    [
        (lambda x: x.tanh(), np.tanh, lambda x: -2.0 * np.tanh(x) * (1.0 - np.tanh(x) ** 2)),
        (lambda x: x.sin(), np.sin, lambda x: -np.sin(x)),
        (lambda x: x**3.0, lambda x: x**3, lambda x: 6.0 * x),
    ],
    ids=["tanh", "sin", "cube"],
)
def test_second_derivative(
    build: Callable[[Tensor], Tensor],
    f: Callable[[np.ndarray], np.ndarray],
    exact: Callable[[np.ndarray], np.ndarray],
) -> None:
    g = Graph()
    x = g.input("x", X.shape, "float64")
    (dx,) = grad(build(x).sum(), [x])
    (d2x,) = grad(dx.sum(), [x])  # elementwise, so this is the diagonal of the Hessian
    (d3x,) = grad(d2x.sum(), [x])
    first, second, third = evaluate([dx, d2x, d3x], {"x": X})
    np.testing.assert_allclose(second, _second_difference(f, X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, exact(X), rtol=1e-10, atol=1e-12)
    # The third derivative too, by central differences of the second.
    h = 1e-5
    numeric_third = (exact(X + h) - exact(X - h)) / (2 * h)
    np.testing.assert_allclose(third, numeric_third, rtol=1e-5, atol=1e-6)
    del first


def test_hessian_vector_product_of_an_mlp() -> None:
    rng = np.random.default_rng(0)
    shapes = {"W1": (3, 6), "b1": (6,), "W2": (6, 2), "b2": (2,)}
    params = {k: rng.standard_normal(s) * 0.7 for k, s in shapes.items()}
    vectors = {k: rng.standard_normal(s) for k, s in shapes.items()}
    X_data = rng.standard_normal((5, 3))
    T_data = rng.standard_normal((5, 2))

    g = Graph()
    x, t = g.input("x", (5, 3), "float64"), g.input("t", (5, 2), "float64")
    p = {k: g.input(k, s, "float64") for k, s in shapes.items()}
    v = {k: g.input(f"v_{k}", s, "float64") for k, s in shapes.items()}
    h = (x @ p["W1"] + p["b1"]).tanh()
    out = (h @ p["W2"] + p["b2"]).tanh()
    loss = ((out - t) ** 2.0).mean()
    grads = grad(loss, list(p.values()))
    gv = grads[0] * v["W1"]
    directional = sum(
        ((gi * v[k]).sum() for gi, k in zip(grads[1:], list(p)[1:], strict=True)), gv.sum()
    )
    hvp = grad(directional, list(p.values()))

    gradient = compile(grads)
    feeds = {"x": X_data, "t": T_data, **{f"v_{k}": val for k, val in vectors.items()}}
    got = compile(hvp)({**feeds, **params})

    eps = 1e-5
    plus = gradient({**feeds, **{k: params[k] + eps * vectors[k] for k in p}})
    minus = gradient({**feeds, **{k: params[k] - eps * vectors[k] for k in p}})
    for k, hv, gp, gm in zip(p, got, plus, minus, strict=True):
        assert hv.shape == shapes[k]
        np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-5, atol=1e-8, err_msg=k)
