"""Adadelta, Adagrad, Adamax, NAdam and RAdam against torch.optim, step by step (float64).

A two-parameter regression model trains ten steps with each configuration, once in
asgrad and once in PyTorch from the same weights and batches; the parameters must
agree after every step (PyTorch's parameters after each step are saved as fixtures: the
``torch_reference`` fixture). Plus the argument checks and a state round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import (
    Adadelta,
    Adagrad,
    Adamax,
    Linear,
    NAdam,
    Optimizer,
    RAdam,
    mse_loss,
)
from asgrad.tensor import ArgumentError, Graph, Program

IN, OUT, BATCH = 3, 2, 5

CONFIGS: list[tuple[type[Optimizer], dict[str, Any]]] = [
    (Adadelta, {}),
    (Adadelta, {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}),
    (Adadelta, {"maximize": True}),
    (Adagrad, {}),
    (Adagrad, {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.3}),
    (Adagrad, {"lr": 0.05, "eps": 1e-3, "maximize": True}),
    (Adamax, {}),
    (Adamax, {"lr": 0.05, "betas": (0.8, 0.95), "weight_decay": 0.2, "eps": 1e-3}),
    (NAdam, {}),
    (NAdam, {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "momentum_decay": 0.01}),
    (NAdam, {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (NAdam, {"maximize": True}),
    (RAdam, {}),
    # beta2 = 0.5 makes rho_t > 5 from step 4: the rectified branch is taken
    (RAdam, {"lr": 0.05, "betas": (0.8, 0.5), "weight_decay": 0.1}),
    (RAdam, {"lr": 0.05, "betas": (0.9, 0.6), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (RAdam, {"lr": 0.05, "betas": (0.9, 0.5), "maximize": True}),
]


def _model() -> Linear:
    return Linear(IN, OUT, dtype="float64", rng=0)


def _batches(n: int = 10) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((BATCH, IN)), rng.standard_normal((BATCH, OUT))) for _ in range(n)]


def _step(model: Linear, opt: Optimizer) -> Program:
    g = Graph()
    x, y = g.input("x", (BATCH, IN), "float64"), g.input("y", (BATCH, OUT), "float64")
    return opt.compile(mse_loss(model(x), y))


@pytest.mark.parametrize(
    ("cls", "kwargs"), CONFIGS, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CONFIGS)]
)
def test_matches_torch_optim_every_step(
    cls: type[Optimizer], kwargs: dict[str, Any], torch_reference: Callable[..., Any]
) -> None:
    model = _model()
    weight, bias = model.parameters()
    data = _batches()
    want = torch_reference(
        lambda torch, w, b, data: _train_torch(torch, cls.__name__, kwargs, w, b, data),
        weight.value.copy(),
        bias.value.copy(),
        data,
    )
    step = _step(model, cls(model.parameters(), **kwargs))
    for (x, y), (w, b) in zip(data, want, strict=True):
        step(x=x, y=y)
        np.testing.assert_allclose(weight.value, w, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(bias.value, b, rtol=1e-9, atol=1e-13)


def _train_torch(
    torch: Any, name: str, kwargs: dict[str, Any], w0: Any, b0: Any, data: Any
) -> list[Any]:
    """PyTorch's parameters after each step of ``torch.optim.<name>``."""
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    theirs = getattr(torch.optim, name)([w, b], **kwargs)
    # torch keeps step counts and NAdam's mu product in the default dtype: float64 here
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    after = []
    try:
        for x, y in data:
            theirs.zero_grad()
            ((torch.tensor(x) @ w + b - torch.tensor(y)) ** 2).mean().backward()
            theirs.step()
            after.append((w.detach().clone(), b.detach().clone()))
    finally:
        torch.set_default_dtype(previous)
    return after


def test_defaults_are_pytorchs(torch_reference: Callable[..., Any]) -> None:
    params = _model().parameters()
    names = ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam"]

    def run(torch: Any) -> Any:
        tensor = [torch.zeros(1, requires_grad=True)]
        keys = ("lr", "eps", "weight_decay", "rho", "lr_decay", "betas", "momentum_decay")
        return [
            {k: v for k, v in getattr(torch.optim, n)(tensor).defaults.items() if k in keys}
            for n in names
        ]

    for cls, defaults in zip(
        (Adadelta, Adagrad, Adamax, NAdam, RAdam), torch_reference(run), strict=True
    ):
        ours = cls(params)
        for key in ("lr", "eps", "weight_decay", "rho", "lr_decay", "betas", "momentum_decay"):
            if key in defaults:
                assert getattr(ours, key) == defaults[key], (cls.__name__, key)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (Adadelta, {"rho": 1.5}),
        (Adadelta, {"eps": -1.0}),
        (Adagrad, {"lr_decay": -0.1}),
        (Adagrad, {"initial_accumulator_value": float("nan")}),
        (Adamax, {"betas": (1.0, 0.9)}),
        (NAdam, {"momentum_decay": -1.0}),
        (RAdam, {"betas": (0.9, -0.1)}),
        (RAdam, {"weight_decay": -0.1}),
    ],
)
def test_bad_hyperparameters_raise(cls: type[Optimizer], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ArgumentError, match="must be"):
        cls(_model().parameters(), **kwargs)


@pytest.mark.parametrize("cls", [Adadelta, Adagrad, Adamax, NAdam, RAdam])
def test_state_dict_round_trip_continues_identically(cls: type[Optimizer]) -> None:
    data = _batches(8)
    model, twin = _model(), _model()
    opt = cls(model.parameters(), lr=0.05)
    step = _step(model, opt)
    for x, y in data[:4]:
        step(x=x, y=y)
    twin.load_state_dict(model.state_dict())
    twin_opt = cls(twin.parameters(), lr=0.05)
    twin_step = _step(twin, twin_opt)
    twin_opt.load_state_dict(opt.state_dict())
    for x, y in data[4:]:
        np.testing.assert_array_equal(step(x=x, y=y)[0], twin_step(x=x, y=y)[0])
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        np.testing.assert_array_equal(a.value, b.value)


def test_loss_falls_in_float32() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, IN)).astype(np.float32)
    y = x @ rng.standard_normal((IN, OUT)).astype(np.float32)
    for cls, lr in ((Adadelta, 1.0), (Adagrad, 0.1), (Adamax, 0.05), (NAdam, 0.05), (RAdam, 0.05)):
        model = Linear(IN, OUT, rng=0)
        g = Graph()
        xt, yt = g.input("x", (32, IN)), g.input("y", (32, OUT))
        step = cls(model.parameters(), lr=lr).compile(mse_loss(model(xt), yt))
        losses = [float(step(x=x, y=y)[0]) for _ in range(40)]
        assert losses[-1] < 0.7 * losses[0], (cls.__name__, losses[0], losses[-1])
