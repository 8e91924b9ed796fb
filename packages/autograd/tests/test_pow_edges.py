"""``pow`` gradients where the base is 0: the 0 * inf cases are masked as PyTorch masks them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

# The masked branches compute 0 ** -1 and log 0 on purpose; numpy warns (divide by zero, 0 * inf).
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# (a, b, d/da, d/db), the derivatives PyTorch 2.x gives (checked below when it is there)
CASES = [
    (0.0, 0.0, 0.0, 0.0),  # x ** y at (0, 0)
    (0.0, 0.3, np.inf, 0.0),  # x ** y at (0, 0.3): d/da = 0.3 * 0**-0.7
    (0.0, 2.0, 0.0, 0.0),  # 0 ** x for x > 0
    (0.0, 1.0, 1.0, 0.0),
    (0.0, -1.0, -np.inf, -np.inf),  # 1/0: infinite either way
    (2.0, 0.0, 0.0, np.log(2.0)),  # x ** 0 away from 0
    (3.0, 2.0, 6.0, 9.0 * np.log(3.0)),
]


def _grads(a: float, b: float) -> tuple[float, float]:
    g = Graph()
    x = g.input("a", (), "float64")
    y = g.input("b", (), "float64")
    da, db = grad(x**y, [x, y])
    got = evaluate([da, db], {"a": np.float64(a), "b": np.float64(b)})
    return float(got[0]), float(got[1])


@pytest.mark.parametrize(("a", "b", "da", "db"), CASES)
def test_pow_gradient_at_zero_base(a: float, b: float, da: float, db: float) -> None:
    got_a, got_b = _grads(a, b)
    np.testing.assert_allclose([got_a, got_b], [da, db], rtol=1e-12)


def test_x_pow_zero_at_zero_has_zero_gradient() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    (dx,) = grad((x**0.0).sum(), [x])
    (got,) = evaluate([dx], {"x": np.array([0.0, 1.0, -2.0])})
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0])


def test_zero_pow_x_has_zero_gradient_for_x_at_least_0() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    (dx,) = grad((0.0**x).sum(), [x])
    (got,) = evaluate([dx], {"x": np.array([0.0, 0.5, 2.0])})
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0])


@pytest.mark.parametrize(("a", "b", "da", "db"), CASES)
def test_pow_gradients_match_pytorch(
    a: float, b: float, da: float, db: float, torch_reference: Callable[..., Any]
) -> None:
    def run(torch: Any, a: float, b: float) -> list[float]:
        ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
        (ta**tb).backward()
        return [ta.grad.item(), tb.grad.item()]

    np.testing.assert_allclose(_grads(a, b), torch_reference(run, a, b), rtol=1e-12)
