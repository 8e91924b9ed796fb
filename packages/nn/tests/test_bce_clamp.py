"""binary_cross_entropy at its clamp: PyTorch's value and PyTorch's gradient.

PyTorch clamps the logs at -100 and differentiates with its own formula,
``(p - t) / max(p (1 - p), 1e-12)``, so at ``p = 0, t = 1`` the loss is 100 and the
gradient -1e12 (a learning signal), where the clamped value is flat; asgrad's gradient
there used to be 0. Checked against that documented formula always, and against
PyTorch itself where it is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Graph, evaluate

EPS = 1e-12
P = np.array(
    [0.0, 1e-45, 3.7e-44, 1e-40, 1e-30, 1e-20, 1e-13, 2e-12, 1e-6, 0.3, 0.5, 0.9, 1 - 1e-7, 1.0]
)
T = np.resize(np.array([1.0, 0.0, 0.3, 0.7, 1.0, 0.5]), P.shape)
W = np.resize(np.array([1.0, 0.5, 2.0]), P.shape)


def _formula(p: np.ndarray, t: np.ndarray, w: np.ndarray, reduction: str) -> tuple[Any, ...]:
    """PyTorch's documented value and input gradient, in float64."""
    p, t = p.astype(np.float64), t.astype(np.float64)
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(p), np.log(1 - p)
    value = -w * (t * np.maximum(log_p, -100) + (1 - t) * np.maximum(log_q, -100))
    gradient = w * (p - t) / np.maximum(p * (1 - p), EPS)
    # PyTorch's target gradient is log(1 - p) - log(p), infinite at p = 0 or 1: 100 or
    # -100 there (the clamped logs)
    target_gradient = w * (np.where(p < 1, log_q, -100) - np.where(p > 0, log_p, -100))
    scale = 1.0 / p.size if reduction == "mean" else 1.0
    if reduction != "none":
        value = value.sum() * scale
    return value, gradient * scale, target_gradient * scale


def _asgrad(p: np.ndarray, t: np.ndarray, w: np.ndarray, reduction: str) -> list[np.ndarray]:
    g = Graph()
    dt = str(p.dtype)
    pt, tt = g.input("p", p.shape, dt), g.input("t", p.shape, dt)
    loss = nn.binary_cross_entropy(pt, tt, weight=w.astype(dt), reduction=reduction)  # type: ignore[arg-type]  # str
    total = loss if reduction != "none" else loss.sum()
    return evaluate([loss, *grad(total, [pt, tt])], {"p": p, "t": t})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("t", [1.0, 0.0])
def test_the_clamp_gives_loss_100_and_pytorchs_gradient(dtype: str, t: float) -> None:
    p = np.array([1.0 - t], dtype)  # p = 0 with t = 1, p = 1 with t = 0: fully wrong
    value, dp, dt = _asgrad(p, np.array([t], dtype), np.ones(1), "mean")
    assert value == 100.0
    np.testing.assert_allclose(dp, [-1e12 if t == 1 else 1e12], rtol=1e-6)
    np.testing.assert_allclose(dt, [100.0 if t == 1 else -100.0], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_values_and_gradients_follow_pytorchs_formula(dtype: str, reduction: str) -> None:
    p, t = P.astype(dtype), T.astype(dtype)
    value, dp, dt = _asgrad(p, t, W, reduction)
    want_value, want_dp, want_dt = _formula(p, t, W, reduction)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(
        value, want_value, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-15
    )
    np.testing.assert_allclose(dp, want_dp, rtol=rtol, atol=0)
    np.testing.assert_allclose(dt, want_dt, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_against_pytorch(dtype: str, reduction: str, torch_reference: Callable[..., Any]) -> None:
    p, t = P.astype(dtype), T.astype(dtype)
    value, dp, dt = _asgrad(p, t, W, reduction)

    def run(torch: Any, p: np.ndarray, t: np.ndarray, w: np.ndarray) -> Any:
        tp, tt = torch.tensor(p, requires_grad=True), torch.tensor(t, requires_grad=True)
        loss = torch.nn.functional.binary_cross_entropy(
            tp, tt, weight=torch.tensor(w), reduction=reduction
        )
        (loss if reduction != "none" else loss.sum()).backward()
        return loss, tp.grad, tt.grad

    want, want_dp, want_dt = torch_reference(run, p, t, W.astype(dtype))
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dp, want_dp, rtol=1e-5, atol=0)
    finite = np.isfinite(want_dt)  # PyTorch's target gradient is inf at p = 0, 1
    assert not finite[0]
    assert not finite[-1]
    np.testing.assert_allclose(dt[finite], want_dt[finite], rtol=1e-5, atol=1e-6)


def test_gradients_are_the_derivative_away_from_the_clamp() -> None:
    rng = np.random.default_rng(9)
    p, t = rng.uniform(0.02, 0.98, (3, 4)), rng.uniform(0.0, 1.0, (3, 4))
    w = rng.uniform(0.5, 2.0, (4,))
    gradient_check(lambda a, b: nn.binary_cross_entropy(a, b, weight=w), [p, t], wrt=[0, 1])
    gradient_check(lambda a, b: nn.binary_cross_entropy(a, b, reduction="none"), [p, t])


def test_bce_after_a_saturated_sigmoid_has_finite_gradients() -> None:
    # float32 sigmoid is 2e-9 at -20, subnormal near -100 and 0 below about -104
    x = np.array([-120.0, -100.0, -90.0, -60.0, -20.0, 0.0, 20.0, 60.0], np.float32)
    g = Graph()
    xt = g.input("x", x.shape)
    loss = nn.binary_cross_entropy(xt.sigmoid(), g.constant(np.ones(x.shape, np.float32)))
    value, dx = evaluate([loss, grad(loss, [xt])[0]], {"x": x})
    assert np.isfinite(value)
    assert np.all(np.isfinite(dx))
    assert np.all(dx <= 0)  # every step pushes the logits up, toward the target
