"""OneCycleLR, ReduceLROnPlateau, MultiStepLR, LambdaLR and CosineAnnealingWarmRestarts
against torch.optim.lr_scheduler's rate sequences, plus their argument checks and state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import SGD, Linear
from asgrad.nn.schedulers import (
    CosineAnnealingWarmRestarts,
    LambdaLR,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
)
from asgrad.tensor import ArgumentError, ArgumentTypeError

LR = 0.1


def _opt(lr: float = LR) -> SGD:
    return SGD(Linear(2, 1, rng=0).parameters(), lr=lr)


def _warmup(t: int) -> float:
    return min(1.0, (t + 1) / 4) * 0.9**t


CONFIGS: list[tuple[str, dict[str, Any], int]] = [
    ("MultiStepLR", {"milestones": [3, 7, 7, 12], "gamma": 0.5}, 16),
    ("LambdaLR", {"lr_lambda": _warmup}, 12),
    ("CosineAnnealingWarmRestarts", {"T_0": 3}, 14),
    ("CosineAnnealingWarmRestarts", {"T_0": 2, "T_mult": 2, "eta_min": 0.01}, 40),
    ("CosineAnnealingWarmRestarts", {"T_0": 1, "T_mult": 3}, 50),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 20, "cycle_momentum": False}, 20),
    (
        "OneCycleLR",
        {
            "max_lr": 0.5,
            "epochs": 3,
            "steps_per_epoch": 7,
            "pct_start": 0.25,
            "anneal_strategy": "linear",
            "cycle_momentum": False,
        },
        21,
    ),
    (
        "OneCycleLR",
        {
            "max_lr": 2.0,
            "total_steps": 30,
            "three_phase": True,
            "div_factor": 10.0,
            "final_div_factor": 100.0,
            "cycle_momentum": False,
        },
        30,
    ),
]


def _torch_rates(torch: Any, name: str, kwargs: dict[str, Any], steps: int) -> list[float]:
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=LR)
    sched = getattr(torch.optim.lr_scheduler, name)(opt, **kwargs)
    rates = []
    for _ in range(steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return rates


def _our_rates(name: str, kwargs: dict[str, Any], steps: int) -> list[float]:
    import asgrad.nn.schedulers as schedulers

    opt = _opt()
    sched = getattr(schedulers, name)(opt, **kwargs)
    rates = []
    for _ in range(steps):
        rates.append(opt.lr)
        sched.step()
    return rates


@pytest.mark.parametrize(
    ("name", "kwargs", "steps"), CONFIGS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONFIGS)]
)
def test_rates_match_torch(
    name: str, kwargs: dict[str, Any], steps: int, torch_reference: Callable[..., Any]
) -> None:
    want = torch_reference(lambda torch: _torch_rates(torch, name, kwargs, steps))
    np.testing.assert_allclose(_our_rates(name, kwargs, steps), want, rtol=1e-12)


def test_one_cycle_refuses_steps_past_the_end_as_torch_does() -> None:
    sched = OneCycleLR(_opt(), max_lr=1.0, total_steps=4)
    for _ in range(4):
        sched.step()
    with pytest.raises(ArgumentError, match="tried to step 5 times; total_steps is 4"):
        sched.step()


def test_warm_restarts_with_fractional_epochs_match_torch(
    torch_reference: Callable[..., Any],
) -> None:
    epochs = np.arange(0, 14, 0.25)

    def run(torch: Any, epochs: Any) -> list[float]:
        p = torch.zeros(1, requires_grad=True)
        topt = torch.optim.SGD([p], lr=LR)
        theirs = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=2, T_mult=2)
        rates = []
        for epoch in epochs:
            theirs.step(float(epoch))
            rates.append(topt.param_groups[0]["lr"])
        return rates

    opt = _opt()
    ours = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    for epoch, want in zip(epochs, torch_reference(run, epochs), strict=True):
        ours.step(float(epoch))
        assert opt.lr == pytest.approx(want, rel=1e-12)


PLATEAU_CONFIGS: list[dict[str, Any]] = [
    {},
    {"patience": 2, "factor": 0.5},
    {"patience": 1, "cooldown": 2, "min_lr": 0.004, "factor": 0.3},
    {"mode": "max", "patience": 1, "threshold": 0.05, "threshold_mode": "abs"},
    {"mode": "max", "patience": 0, "threshold": 0.1},
    {"patience": 0, "factor": 0.5, "min_lr": 0.0999999995, "eps": 1e-8},  # below eps: kept
]


@pytest.mark.parametrize("kwargs", PLATEAU_CONFIGS)
def test_reduce_on_plateau_matches_torch(
    kwargs: dict[str, Any], torch_reference: Callable[..., Any]
) -> None:
    rng = np.random.default_rng(0)
    metrics = list(1.0 / np.arange(1, 8)) + list(0.14 + 0.02 * rng.standard_normal(30))

    def run(torch: Any, metrics: list[float]) -> list[float]:
        p = torch.zeros(1, requires_grad=True)
        topt = torch.optim.SGD([p], lr=LR)
        theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
        rates = []
        for m in metrics:
            theirs.step(m)
            rates.append(topt.param_groups[0]["lr"])
        return rates

    opt = _opt()
    ours = ReduceLROnPlateau(opt, **kwargs)
    for m, want in zip(metrics, torch_reference(run, metrics), strict=True):
        ours.step(m)
        assert opt.lr == pytest.approx(want, rel=1e-12)
        assert ours.get_last_lr() == [opt.lr]
    assert opt.lr < LR or kwargs.get("min_lr", 0) > 0.09


def test_reduce_on_plateau_state_round_trips_through_json() -> None:
    opt, twin_opt = _opt(), _opt()
    sched = ReduceLROnPlateau(opt, patience=1, cooldown=1)
    for m in [1.0, 1.0, 1.0, 0.5]:
        sched.step(m)
    twin = ReduceLROnPlateau(twin_opt, patience=1, cooldown=1)
    twin.load_state_dict(json.loads(json.dumps(sched.state_dict())))
    assert twin_opt.lr == opt.lr
    for m in [0.5, 0.5, 0.5, 0.4]:
        sched.step(m)
        twin.step(m)
        assert twin_opt.lr == opt.lr


def test_closed_form_schedulers_resume_from_state() -> None:
    opt, twin_opt = _opt(), _opt()
    sched = MultiStepLR(opt, [2, 4])
    for _ in range(3):
        sched.step()
    twin = MultiStepLR(twin_opt, [2, 4])
    twin.load_state_dict(json.loads(json.dumps(sched.state_dict())))
    sched.step()
    twin.step()
    assert twin_opt.lr == opt.lr == pytest.approx(LR * 0.01)


BAD: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: MultiStepLR(_opt(), [-1, 2]), ArgumentError, "milestones"),
    (lambda: LambdaLR(_opt(), 0.5), ArgumentTypeError, "lr_lambda"),  # type: ignore[arg-type]
    (lambda: CosineAnnealingWarmRestarts(_opt(), T_0=0), ArgumentError, "T_0"),
    (lambda: CosineAnnealingWarmRestarts(_opt(), T_0=2, T_mult=0), ArgumentError, "T_mult"),
    (lambda: OneCycleLR(_opt(), max_lr=1.0), ArgumentError, "total_steps"),
    (lambda: OneCycleLR(_opt(), 1.0, 10, pct_start=1.5), ArgumentError, "pct_start"),
    (lambda: OneCycleLR(_opt(), 1.0, 10, anneal_strategy="exp"), ArgumentError, "anneal"),
    (lambda: OneCycleLR(_opt(), 1.0, 10, cycle_momentum=True), ArgumentError, "compiled"),
    (lambda: ReduceLROnPlateau(_opt(), mode="up"), ArgumentError, "mode"),
    (lambda: ReduceLROnPlateau(_opt(), factor=1.0), ArgumentError, "factor"),
    (lambda: ReduceLROnPlateau(_opt(), threshold_mode="x"), ArgumentError, "threshold_mode"),
    (lambda: ReduceLROnPlateau(object()), ArgumentTypeError, "Optimizer"),  # type: ignore[arg-type]
    (lambda: ReduceLROnPlateau(_opt()).step("low"), ArgumentTypeError, "number"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("make", "error", "match"), BAD)
def test_bad_arguments_raise(
    make: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        make()
