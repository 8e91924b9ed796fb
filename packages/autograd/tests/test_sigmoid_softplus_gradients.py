"""Gradients of sigmoid, silu and softplus in their tails and past softplus's threshold:
finite, and the derivative of the values (``gradient_check`` in
float64). ``log(sigmoid(-20))`` used to be -inf with a NaN gradient, and
``softplus(3e38, beta=2)`` overflowed; the values are checked in
``packages/tensor/tests/test_sigmoid_softplus.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Graph, evaluate


def _value_and_grad(op: str, x: np.ndarray, **attrs: float) -> list[np.ndarray]:
    g = Graph()
    t = g.input("x", x.shape, str(x.dtype))
    y = getattr(t, op)(**attrs) if op != "log_sigmoid" else t.sigmoid().log()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no division by zero, no invalid value
        return evaluate([y, grad(y.sum(), [t])[0]], {"x": x})


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x.astype(np.float64)))
    return np.where(x < 0, e / (1 + e), 1 / (1 + e))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_sigmoid_at_minus_20_is_finite_with_a_finite_gradient(dtype: str) -> None:
    x = np.array([-20.0, -30.0, -80.0], dtype)
    value, gradient = _value_and_grad("log_sigmoid", x)
    np.testing.assert_allclose(value, x, rtol=1e-6)  # log sigmoid(x) ~ x for x << 0
    np.testing.assert_allclose(gradient, 1.0, rtol=1e-6)  # 1 - sigmoid(x)


@pytest.mark.parametrize("op", ["sigmoid", "silu"])
def test_sigmoid_and_silu_gradients_in_float64(op: str) -> None:
    x = np.array([-40.0, -20.0, -17.0, -3.0, -0.5, 0.0, 0.7, 4.0, 17.0, 30.0])
    gradient_check(lambda t: getattr(t, op)(), [x])
    gradient_check(lambda t: t.sigmoid().log(), [x])


@pytest.mark.parametrize("beta", [1.0, 2.0, 0.5])
def test_softplus_gradient_of_huge_inputs_is_one_or_zero(beta: float) -> None:
    x = np.array([3e38, -3e38, np.finfo(np.float32).max, 1e30, -1e30, np.inf, -np.inf], np.float32)
    _, gradient = _value_and_grad("softplus", x, beta=beta)
    np.testing.assert_array_equal(gradient, (x > 0).astype(np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softplus_gradient_follows_pytorchs_threshold(dtype: str) -> None:
    # beta x > 20: softplus is x, its gradient 1; below: sigmoid(beta x)
    beta = 2.0
    x = np.array([9.0, 9.99, 10.01, 11.0, 50.0, -12.0, -600.0], dtype)
    _, gradient = _value_and_grad("softplus", x, beta=beta)
    bx = x.astype(np.float64) * beta
    want = np.where(bx > 20.0, 1.0, _sigmoid64(bx))
    np.testing.assert_allclose(gradient, want, rtol=10 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("beta", [1.0, 2.0, 0.25, -1.5])
def test_softplus_gradients_in_float64(beta: float) -> None:
    # away from the threshold, where the value steps by log1p(e**-20) / beta
    x = np.array([-700.0, -30.0, -5.0, -0.3, 0.0, 0.4, 6.0, 9.0, 12.0, 40.0, 900.0]) / abs(beta)
    gradient_check(lambda t: t.softplus(beta), [x])


def test_gradients_against_pytorch(torch_reference: Callable[..., Any]) -> None:
    x = np.linspace(-90.0, 30.0, 241).astype(np.float32)

    def run(torch: Any, x: np.ndarray) -> list[Any]:
        tx = torch.tensor(x, requires_grad=True)
        grads = []
        for ref in (
            torch.sigmoid,
            torch.nn.functional.silu,
            lambda v: torch.nn.functional.softplus(v, beta=2.0),
        ):
            tx.grad = None
            ref(tx).sum().backward()
            grads.append(tx.grad.numpy().copy())
        return grads

    want = torch_reference(run, x)
    ops = [("sigmoid", {}), ("silu", {}), ("softplus", {"beta": 2.0})]
    for (op, attrs), ref in zip(ops, want, strict=True):
        _, gradient = _value_and_grad(op, x, **attrs)
        np.testing.assert_allclose(gradient, ref, rtol=1e-5, atol=1e-30)
