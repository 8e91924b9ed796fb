"""sigmoid, silu and softplus are accurate in their tails and never overflow.

sigmoid used to be ``0.5 * (1 + tanh(x / 2))``: float32 ``sigmoid(-17)`` was 5.96e-8
(the true value is 4.14e-8), and 0 below about -19, so ``log(sigmoid(-20))`` was -inf
with a NaN gradient. softplus formed ``beta * x``, which overflows for
``softplus(3e38, beta=2)``. Values are checked against float64 references (and
PyTorch where installed); the gradients are checked in
``packages/autograd/tests/test_sigmoid_softplus_gradients.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import ArgumentError, Graph, Tensor, evaluate

TAILS = np.array([-100.0, -88.0, -40.0, -20.0, -17.0, -5.0, 0.0, 5.0, 17.0, 20.0, 40.0])


def _run(build: Callable[[Tensor], Tensor], x: np.ndarray) -> list[np.ndarray]:
    g = Graph()
    y = build(g.input("x", x.shape, str(x.dtype)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no division by zero, no invalid value
        return evaluate(y, {"x": x})


def _exact_sigmoid(x: np.ndarray) -> np.ndarray:
    # float64 reference, 1 / (1 + e**-x) evaluated where it does not overflow
    e = np.exp(-np.abs(x.astype(np.float64)))
    return np.where(x < 0, e / (1 + e), 1 / (1 + e))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_keeps_its_relative_precision_in_the_negative_tail(dtype: str) -> None:
    x = TAILS.astype(dtype)
    (y,) = _run(lambda t: t.sigmoid(), x)
    ref = _exact_sigmoid(x)
    tiny = np.finfo(dtype).tiny
    normal = ref > tiny
    np.testing.assert_allclose(y[normal], ref[normal], rtol=4 * np.finfo(dtype).eps)
    assert y.dtype == np.dtype(dtype)


def test_float32_sigmoid_tail_values_are_pytorchs() -> None:
    (y,) = _run(lambda t: t.sigmoid(), np.array([-17.0, -20.0, -88.0], np.float32))
    np.testing.assert_allclose(y, [4.1399375e-08, 2.0611537e-09, 6.0546e-39], rtol=1e-4)
    assert y[1] > 0


def test_sigmoid_saturates_exactly_and_passes_nan() -> None:
    x = np.array([-np.inf, -1e30, np.nan, 1e30, np.inf], np.float32)
    (y,) = _run(lambda t: t.sigmoid(), x)
    np.testing.assert_array_equal(y, np.array([0, 0, np.nan, 1, 1], np.float32))


def test_silu_uses_the_stable_sigmoid() -> None:
    x = np.array([-20.0, -17.0, -5.0, 3.0], np.float32)
    (y,) = _run(lambda t: t.silu(), x)
    np.testing.assert_allclose(y, x * _exact_sigmoid(x), rtol=1e-6)


def test_against_pytorch(torch_reference: Callable[..., Any]) -> None:
    x = np.linspace(-90.0, 30.0, 241).astype(np.float32)
    ys = _run(lambda t: t.sigmoid(), x) + _run(lambda t: t.silu(), x)
    ys += _run(lambda t: t.softplus(), x) + _run(lambda t: t.softplus(2.0), x)

    def run(torch: Any, x: np.ndarray) -> list[Any]:
        tx = torch.tensor(x)
        F = torch.nn.functional
        return [torch.sigmoid(tx), F.silu(tx), F.softplus(tx), F.softplus(tx, beta=2.0)]

    refs = torch_reference(run, x)
    for y, ref in zip(ys, refs, strict=True):  # PyTorch flushes subnormal sigmoids to 0
        np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-34)


@pytest.mark.parametrize("beta", [1.0, 2.0, 0.5])
def test_softplus_of_huge_inputs_is_the_input_or_zero_without_overflow(beta: float) -> None:
    x = np.array([3e38, -3e38, np.finfo(np.float32).max, 1e30, -1e30, np.inf, -np.inf], np.float32)
    (value,) = _run(lambda t: t.softplus(beta), x)
    np.testing.assert_array_equal(value, np.where(x > 0, x, 0).astype(np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softplus_follows_pytorchs_threshold(dtype: str) -> None:
    # beta x > 20: exactly x; below: log1p(e**(beta x)) / beta
    beta = 2.0
    x = np.array([9.0, 9.99, 10.01, 11.0, 50.0, -12.0, -600.0], dtype)
    (value,) = _run(lambda t: t.softplus(beta), x)
    bx = x.astype(np.float64) * beta
    below = np.log1p(np.exp(np.minimum(bx, 20.0))) / beta
    ref = np.where(bx > 20.0, x, below)
    np.testing.assert_allclose(value, ref, rtol=10 * np.finfo(dtype).eps, atol=0)
    assert value[3] == x[3]
    assert value[2] == x[2]


def test_softplus_rejects_beta_zero() -> None:
    x = Graph().input("x", (3,))
    for beta in (0.0, float("inf"), float("nan")):
        with pytest.raises(ArgumentError, match="'beta' must be a finite non-zero"):
            x.softplus(beta)
