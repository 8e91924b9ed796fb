"""Every activation of ``asgrad.nn.functional`` and its module, against PyTorch's:
values and input gradients in float64 (PyTorch optional: skipped without it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# name -> (kwargs for both, input maker)
CASES: dict[str, dict[str, Any]] = {
    "relu": {},
    "relu6": {},
    "leaky_relu": {"negative_slope": 0.2},
    "elu": {"alpha": 0.7},
    "selu": {},
    "celu": {"alpha": 0.6},
    "gelu": {"approximate": "tanh"},
    "silu": {},
    "mish": {},
    "hardswish": {},
    "hardsigmoid": {},
    "hardtanh": {"min_val": -0.8, "max_val": 0.6},
    "sigmoid": {},
    "logsigmoid": {},
    "tanh": {},
    "tanhshrink": {},
    "softsign": {},
    "softplus": {"beta": 2.0},
    "softshrink": {"lambd": 0.3},
    "hardshrink": {"lambd": 0.3},
    "threshold": {"threshold": 0.2, "value": -1.5},
    "glu": {"dim": 1},
    "softmax": {"dim": 1},
    "softmin": {"dim": 1},
    "log_softmax": {"dim": 1},
}

# kinks of the piecewise functions, kept away from (their gradients are one-sided)
KINKS = [-3.0, -0.8, -0.3, 0.0, 0.2, 0.3, 0.6, 3.0, 6.0]


def _x(shape: tuple[int, ...] = (4, 6, 3)) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(shape) * 3.0
    for k in KINKS:
        x = np.where(np.abs(x - k) < 0.05, x + 0.1, x)
    return x


def _torch_call(name: str, x: Any, kwargs: dict[str, Any]) -> Any:
    if name in ("sigmoid", "tanh"):
        return getattr(torch, name)(x)
    return getattr(TF, name)(x, **kwargs)


def _value_and_grad(fn: Callable[[Tensor], Tensor], x: np.ndarray) -> tuple[Any, Any]:
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = fn(t)
    w = np.cos(np.arange(np.prod(y.shape))).reshape(y.shape)  # a seed that is not all ones
    (dx,) = grad((y * g.constant(w, "float64")).sum(), [t])
    return evaluate([y, dx], {"x": x})


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_matches_pytorch(name: str) -> None:
    kwargs, x = CASES[name], _x()
    got, got_dx = _value_and_grad(lambda t: getattr(F, name)(t, **kwargs), x)
    xt = torch.tensor(x, requires_grad=True)
    want = _torch_call(name, xt, kwargs)
    w = torch.tensor(np.cos(np.arange(want.numel())).reshape(tuple(want.shape)))
    (want * w).sum().backward()
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    # PyTorch's float64 backward kernels of these two use float32 constants (1/6, 1/alpha)
    rtol = 1e-6 if name in ("hardsigmoid", "celu") else 1e-9
    np.testing.assert_allclose(got_dx, xt.grad.numpy(), rtol=rtol, atol=1e-11)


def test_prelu_matches_pytorch_per_channel_and_shared() -> None:
    x = _x((2, 3, 4, 4))
    for weight in (np.array([0.1, -0.3, 0.6]), np.array([0.25])):
        g = Graph()
        t = g.input("x", x.shape, "float64")
        w = g.input("w", weight.shape, "float64")
        y = F.prelu(t, w)
        dx, dw = grad(y.sum() * 1.5, [t, w])
        got, got_dx, got_dw = evaluate([y, dx, dw], {"x": x, "w": weight})
        xt = torch.tensor(x, requires_grad=True)
        wt = torch.tensor(weight, requires_grad=True)
        want = TF.prelu(xt, wt)
        (want.sum() * 1.5).backward()
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(got_dx, xt.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(got_dw, wt.grad.numpy(), rtol=1e-10)


MODULES: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
    (lambda: nn.Mish(), lambda: torch.nn.Mish()),
    (lambda: nn.Hardswish(inplace=True), lambda: torch.nn.Hardswish()),
    (lambda: nn.Hardsigmoid(), lambda: torch.nn.Hardsigmoid()),
    (lambda: nn.ReLU6(True), lambda: torch.nn.ReLU6()),
    (lambda: nn.Hardtanh(-2.0, 0.6), lambda: torch.nn.Hardtanh(-2.0, 0.6)),
    (lambda: nn.SELU(), lambda: torch.nn.SELU()),
    (lambda: nn.CELU(0.6), lambda: torch.nn.CELU(0.6)),
    (lambda: nn.Softsign(), lambda: torch.nn.Softsign()),
    (lambda: nn.LogSigmoid(), lambda: torch.nn.LogSigmoid()),
    (lambda: nn.Tanhshrink(), lambda: torch.nn.Tanhshrink()),
    (lambda: nn.Softshrink(0.3), lambda: torch.nn.Softshrink(0.3)),
    (lambda: nn.Hardshrink(0.3), lambda: torch.nn.Hardshrink(0.3)),
    (lambda: nn.Threshold(0.2, -1.0), lambda: torch.nn.Threshold(0.2, -1.0)),
    (lambda: nn.GLU(1), lambda: torch.nn.GLU(1)),
    (lambda: nn.Softmin(1), lambda: torch.nn.Softmin(1)),
    (lambda: nn.PReLU(6, init=0.1), lambda: torch.nn.PReLU(6, init=0.1)),
]


@pytest.mark.parametrize(("ours", "theirs"), MODULES, ids=lambda f: type(f()).__name__)
def test_module_matches_pytorch(ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    x = _x().astype(np.float32)
    module = ours()
    g = Graph()
    (got,) = evaluate([module(g.input("x", x.shape))], {"x": x})
    want = theirs()(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert repr(module).startswith(type(module).__name__)


def test_prelu_weight_is_a_trainable_parameter_with_pytorchs_name() -> None:
    layer = nn.PReLU(3)
    assert list(layer.state_dict()) == ["weight"]
    np.testing.assert_array_equal(layer.state_dict()["weight"], np.full(3, 0.25, np.float32))
    assert layer.num_parameters() == 3
