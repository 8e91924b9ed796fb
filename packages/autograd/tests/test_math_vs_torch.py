"""The math ops against PyTorch where its semantics are the point: gradients of prod with
zeros, of var/std with a correction and of logsumexp; rounding halves; integer floor
division and remainder of negatives. PyTorch's answers come from the committed fixtures
(``torch_reference``, the root conftest), and from PyTorch too where it is installed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture


def _value_and_grad(fn: Callable[[Tensor], Tensor], x: np.ndarray) -> tuple[Any, Any]:
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = fn(t)
    (dx,) = grad(
        (y * y.graph.constant(np.arange(1, y.size + 1).reshape(y.shape), "float64")).sum(), [t]
    )
    value, gx = evaluate([y, dx], {"x": x})
    return value, gx


def _torch_value_and_grad(
    torch_reference: Reference, fn: Callable[[Any], Any], x: np.ndarray
) -> tuple[Any, Any]:
    def run(torch: Any, x: np.ndarray) -> tuple[Any, Any]:
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        y = fn(t)
        weights = torch.arange(1, y.numel() + 1, dtype=torch.float64).reshape(y.shape)
        (y * weights).sum().backward()
        return y.detach().numpy(), t.grad.numpy()

    value, gx = torch_reference(run, x)
    return value, gx


PROD_INPUTS = {
    "no zero": np.array([[1.5, -2.0, 0.5], [3.0, 1.0, -1.0]]),
    "one zero": np.array([[1.5, 0.0, 0.5], [3.0, 1.0, -1.0]]),
    "several zeros": np.array([[0.0, 0.0, 0.5], [0.0, 2.0, 0.0]]),
}


@pytest.mark.parametrize("name", sorted(PROD_INPUTS))
@pytest.mark.parametrize("axis", [0, 1])
def test_prod_value_and_gradient_match_pytorch(
    name: str, axis: int, torch_reference: Reference
) -> None:
    x = PROD_INPUTS[name]
    got = _value_and_grad(lambda t: t.prod(axis=axis), x)
    want = _torch_value_and_grad(torch_reference, lambda t: t.prod(dim=axis), x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_prod_over_all_axes_with_one_zero_matches_pytorch(torch_reference: Reference) -> None:
    x = PROD_INPUTS["one zero"]
    got = _value_and_grad(lambda t: t.prod(), x)
    want = _torch_value_and_grad(torch_reference, lambda t: t.prod(), x)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_and_std_with_a_correction_match_pytorch(
    op: str, correction: int, torch_reference: Reference
) -> None:
    x = np.random.default_rng(3).standard_normal((3, 5))
    got = _value_and_grad(lambda t: getattr(t, op)(axis=1, correction=correction), x)
    want = _torch_value_and_grad(
        torch_reference, lambda t: getattr(t, op)(dim=1, correction=correction), x
    )
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_logsumexp_value_and_gradient_match_pytorch(torch_reference: Reference) -> None:
    x = np.array([[1000.0, 999.0, -5.0], [-np.inf, 0.0, 1.0]])
    got = _value_and_grad(lambda t: t.logsumexp(axis=1), x)
    want = _torch_value_and_grad(torch_reference, lambda t: t.logsumexp(dim=1), x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # frac(inf) = inf - inf
def test_rounding_matches_pytorch(torch_reference: Reference) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.125, -3.7, 1e30, np.nan, np.inf])
    g = Graph()
    v = g.input("x", x.shape, "float64")
    outs = [v.round(), v.round(2), v.floor(), v.ceil(), v.trunc(), v.frac()]

    def run(torch: Any, x: np.ndarray) -> list[Any]:
        t = torch.tensor(x)
        return [t.round(), t.round(decimals=2), t.floor(), t.ceil(), t.trunc(), t.frac()]

    want = torch_reference(run, x)
    for a, b in zip(evaluate(outs, {"x": x}), want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_integer_division_of_negatives_matches_pytorch(torch_reference: Reference) -> None:
    a = np.array([7, -7, 7, -7, 0, -1, 13])
    b = np.array([2, 2, -2, -2, 5, 3, -4])
    g = Graph()
    x, y = g.input("a", a.shape, "int64"), g.input("b", b.shape, "int64")
    q, r = evaluate([x // y, x % y], {"a": a, "b": b})
    want_q, want_r = torch_reference(
        lambda torch, a, b: (torch.tensor(a) // torch.tensor(b), torch.tensor(a) % torch.tensor(b)),
        a,
        b,
    )
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)


def test_isclose_and_nan_to_num_match_pytorch(torch_reference: Reference) -> None:
    a = np.array([1.0, np.inf, np.inf, np.nan, 1e-9, 1.0, -np.inf, 2.0])
    b = np.array([1.0 + 1e-6, np.inf, -np.inf, np.nan, 0.0, 1.1, 1.0, 2.0 + 1e-4])
    g = Graph()
    x, y = g.input("a", a.shape, "float64"), g.input("b", b.shape, "float64")
    outs = evaluate([x.isclose(y), x.isclose(y, equal_nan=True), x.nan_to_num()], {"a": a, "b": b})

    def run(torch: Any, a: np.ndarray, b: np.ndarray) -> list[Any]:
        ta, tb = torch.tensor(a), torch.tensor(b)
        return [torch.isclose(ta, tb), torch.isclose(ta, tb, equal_nan=True), torch.nan_to_num(ta)]

    for got, want in zip(outs, torch_reference(run, a, b), strict=True):
        np.testing.assert_array_equal(got, want)


CUMPROD_INPUTS = {
    "no zero": np.array([[1.5, -2.0, 0.5, 3.0], [3.0, 1.0, -1.0, 2.0]]),
    "one zero": np.array([[1.5, 0.0, 0.5, 3.0], [3.0, 1.0, -1.0, 0.0]]),
    "several zeros": np.array([[0.0, 2.0, 0.0, 3.0], [1.0, 0.0, 0.0, 2.0]]),
}


@pytest.mark.parametrize("name", sorted(CUMPROD_INPUTS))
@pytest.mark.parametrize("axis", [0, 1])
def test_cumprod_value_and_gradient_match_pytorch(
    name: str, axis: int, torch_reference: Reference
) -> None:
    x = CUMPROD_INPUTS[name]
    got = _value_and_grad(lambda t: t.cumprod(axis), x)
    want = _torch_value_and_grad(torch_reference, lambda t: t.cumprod(dim=axis), x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["cumsum", "logcumsumexp", "cummax", "cummin"])
def test_scans_match_pytorch(op: str, torch_reference: Reference) -> None:
    x = np.array([[0.5, -1.0, 2.0, 2.0, -3.0], [4.0, 1.0, 1.0, 5.0, -100.0]])
    ours = {"cummax": lambda t: t.cummax(1)[0], "cummin": lambda t: t.cummin(1)[0]}
    theirs = {"cummax": lambda t: t.cummax(1)[0], "cummin": lambda t: t.cummin(1)[0]}
    got = _value_and_grad(ours.get(op, lambda t: getattr(t, op)(1)), x)
    want = _torch_value_and_grad(torch_reference, theirs.get(op, lambda t: getattr(t, op)(1)), x)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_topk_values_indices_and_gradients_match_pytorch(
    descending: bool, torch_reference: Reference
) -> None:
    x = np.array([[0.5, -1.0, 2.0, 2.0, -3.0, 7.0], [4.0, 1.0, 1.0, 5.0, -100.0, 0.0]])
    got = _value_and_grad(lambda t: t.sort(1, descending=descending)[0], x)
    want = _torch_value_and_grad(
        torch_reference, lambda t: t.sort(dim=1, descending=descending, stable=True)[0], x
    )
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    g = Graph()
    t = g.input("x", x.shape, "float64")
    order = evaluate([t.argsort(1, descending=descending)], {"x": x})[0]
    want_order = torch_reference(
        lambda torch, x: torch.tensor(x).sort(dim=1, descending=descending, stable=True)[1], x
    )
    np.testing.assert_array_equal(order, want_order)
    distinct = x + np.arange(x.size).reshape(x.shape) * 1e-3  # PyTorch orders ties freely
    got = _value_and_grad(lambda t: t.topk(3, largest=not descending)[0], distinct)
    want = _torch_value_and_grad(
        torch_reference, lambda t: t.topk(3, largest=not descending)[0], distinct
    )
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
