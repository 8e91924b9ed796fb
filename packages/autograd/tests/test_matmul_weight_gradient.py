"""The gradient of a 2-D weight multiplied by a batch of sequences is one 2-D product.

``x @ w`` with ``x`` of shape ``(B, T, K)`` and ``w`` of shape ``(K, N)`` (a linear
layer on a batch of sequences): the rule folds ``B * T`` into the product's sum, as
PyTorch's Linear does, instead of making ``B`` products and summing them down.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate, make_schedule

BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def _weight_gradient_graph(dtype: str = "float32", free: tuple[int, ...] = ()) -> Tensor:
    g = Graph()
    x = g.input("x", (4, 3, 6), dtype, free=free)
    w = g.input("w", (6, 5), dtype)
    y = x @ w
    (gw,) = grad((y * y).sum(), [w])
    return gw


def test_the_weight_gradient_is_one_two_dimensional_product() -> None:
    gw = _weight_gradient_graph()
    products = [n for n in make_schedule([gw]).nodes if n.op == "matmul"]
    assert [n.shape for n in products] == [(4, 3, 5), (6, 5)]
    assert not any(n.op == "sum_to_like" for n in make_schedule([gw]).nodes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_folded_weight_gradient_follows_the_batch_fed(backend: str) -> None:
    gw = _weight_gradient_graph(free=(0,))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    for batch in (4, 1, 7):
        x = rng.standard_normal((batch, 3, 6)).astype(np.float32)
        (got,) = evaluate([gw], {"x": x, "w": w}, backend=backend)
        want = np.einsum("btk,btn->kn", x, 2 * (x @ w))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_float16_weight_gradient_rounds_once() -> None:
    # one product accumulating in float32 over all B * T rows, rounded to float16 once
    gw = _weight_gradient_graph("float16")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 6)).astype(np.float16)
    w = rng.standard_normal((6, 5)).astype(np.float16)
    (got,) = evaluate([gw], {"x": x, "w": w})
    y = (x.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
    dy = y + y  # the product rule's two terms, 1 * y and y * 1, added in float16
    rows, dys = x.reshape(12, 6).astype(np.float32), dy.reshape(12, 5).astype(np.float32)
    want = (rows.T @ dys).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)
