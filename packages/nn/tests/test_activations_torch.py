"""Every activation of ``asgrad.nn.functional`` and its module, against PyTorch's:
values and input gradients in float64 (PyTorch's answers saved as fixtures: the
``torch_reference`` fixture of the root conftest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture

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


def _torch_call(torch: Any, name: str, x: Any, kwargs: dict[str, Any]) -> Any:
    if name in ("sigmoid", "tanh"):
        return getattr(torch, name)(x)
    return getattr(torch.nn.functional, name)(x, **kwargs)


def _value_and_grad(fn: Callable[[Tensor], Tensor], x: np.ndarray) -> tuple[Any, Any]:
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = fn(t)
    w = np.cos(np.arange(np.prod(y.shape))).reshape(y.shape)  # a seed that is not all ones
    (dx,) = grad((y * g.constant(w, "float64")).sum(), [t])
    return evaluate([y, dx], {"x": x})


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_matches_pytorch(name: str, torch_reference: Reference) -> None:
    kwargs, x = CASES[name], _x()
    got, got_dx = _value_and_grad(lambda t: getattr(F, name)(t, **kwargs), x)

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        want = _torch_call(torch, name, xt, kwargs)
        w = torch.tensor(np.cos(np.arange(want.numel())).reshape(tuple(want.shape)))
        (want * w).sum().backward()
        return want, xt.grad

    want, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # PyTorch's float64 backward kernels of these two use float32 constants (1/6, 1/alpha)
    rtol = 1e-6 if name in ("hardsigmoid", "celu") else 1e-9
    np.testing.assert_allclose(got_dx, want_dx, rtol=rtol, atol=1e-11)


def test_prelu_matches_pytorch_per_channel_and_shared(torch_reference: Reference) -> None:
    x = _x((2, 3, 4, 4))
    for weight in (np.array([0.1, -0.3, 0.6]), np.array([0.25])):
        g = Graph()
        t = g.input("x", x.shape, "float64")
        w = g.input("w", weight.shape, "float64")
        y = F.prelu(t, w)
        dx, dw = grad(y.sum() * 1.5, [t, w])
        got, got_dx, got_dw = evaluate([y, dx, dw], {"x": x, "w": weight})

        def run(torch: Any, x: np.ndarray, weight: np.ndarray) -> Any:
            xt = torch.tensor(x, requires_grad=True)
            wt = torch.tensor(weight, requires_grad=True)
            want = torch.nn.functional.prelu(xt, wt)
            (want.sum() * 1.5).backward()
            return want, xt.grad, wt.grad

        want, want_dx, want_dw = torch_reference(run, x, weight)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(got_dx, want_dx, rtol=1e-12)
        np.testing.assert_allclose(got_dw, want_dw, rtol=1e-10)


# the module's name in both libraries, asgrad's module, the arguments of PyTorch's
MODULES: list[tuple[str, Callable[[], Any], tuple[Any, ...]]] = [
    ("Mish", lambda: nn.Mish(), ()),
    ("Hardswish", lambda: nn.Hardswish(inplace=True), ()),
    ("Hardsigmoid", lambda: nn.Hardsigmoid(), ()),
    ("ReLU6", lambda: nn.ReLU6(True), ()),
    ("Hardtanh", lambda: nn.Hardtanh(-2.0, 0.6), (-2.0, 0.6)),
    ("SELU", lambda: nn.SELU(), ()),
    ("CELU", lambda: nn.CELU(0.6), (0.6,)),
    ("Softsign", lambda: nn.Softsign(), ()),
    ("LogSigmoid", lambda: nn.LogSigmoid(), ()),
    ("Tanhshrink", lambda: nn.Tanhshrink(), ()),
    ("Softshrink", lambda: nn.Softshrink(0.3), (0.3,)),
    ("Hardshrink", lambda: nn.Hardshrink(0.3), (0.3,)),
    ("Threshold", lambda: nn.Threshold(0.2, -1.0), (0.2, -1.0)),
    ("GLU", lambda: nn.GLU(1), (1,)),
    ("Softmin", lambda: nn.Softmin(1), (1,)),
    ("PReLU", lambda: nn.PReLU(6, init=0.1), (6, 0.1)),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_pytorch(
    name: str, ours: Callable[[], Any], theirs: tuple[Any, ...], torch_reference: Reference
) -> None:
    x = _x().astype(np.float32)
    module = ours()
    assert type(module).__name__ == name
    g = Graph()
    (got,) = evaluate([module(g.input("x", x.shape))], {"x": x})
    want = torch_reference(
        lambda torch, x: getattr(torch.nn, name)(*theirs)(torch.tensor(x)).detach(), x
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert repr(module).startswith(type(module).__name__)


def test_prelu_weight_is_a_trainable_parameter_with_pytorchs_name() -> None:
    layer = nn.PReLU(3)
    assert list(layer.state_dict()) == ["weight"]
    np.testing.assert_array_equal(layer.state_dict()["weight"], np.full(3, 0.25, np.float32))
    assert layer.num_parameters() == 3
