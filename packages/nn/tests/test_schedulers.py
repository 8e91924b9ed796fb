"""Learning-rate schedulers: PyTorch's formulas, state round trips, and a compiled step
that picks up each new rate without recompiling."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import SGD, Linear, mse_loss
from asgrad.nn.optim import Optimizer
from asgrad.nn.schedulers import (
    CosineAnnealingLR,
    ExponentialLR,
    LinearWarmup,
    LRScheduler,
    StepLR,
    WarmupCosine,
)
from asgrad.tensor import Graph

BASE = 0.1
STEPS = 25


def optimizer(lr: float = BASE) -> Optimizer:
    return SGD(Linear(2, 1, dtype="float64", rng=0).parameters(), lr=lr)


def rates(sched: LRScheduler, n: int = STEPS) -> list[float]:
    out = []
    for _ in range(n):
        out.append(sched.optimizer.lr)
        assert sched.get_last_lr() == [sched.optimizer.lr]
        sched.step()
    return out


def cosine(t: float, span: float, base: float, eta_min: float) -> float:
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / span)) / 2


def warmup(t: int, w: int, s: float) -> float:
    return 1.0 if t >= w else s + (1 - s) * t / w


MAKERS: dict[str, tuple[Callable[[Optimizer], LRScheduler], Callable[[int], float]]] = {
    "step": (lambda o: StepLR(o, step_size=4, gamma=0.5), lambda t: BASE * 0.5 ** (t // 4)),
    "exponential": (lambda o: ExponentialLR(o, gamma=0.9), lambda t: BASE * 0.9**t),
    "cosine": (
        lambda o: CosineAnnealingLR(o, T_max=10, eta_min=0.01),
        lambda t: cosine(t, 10, BASE, 0.01),
    ),
    "warmup": (lambda o: LinearWarmup(o, warmup_steps=5), lambda t: BASE * warmup(t, 5, 0.0)),
    "warmup-start": (
        lambda o: LinearWarmup(o, warmup_steps=5, start_factor=0.2),
        lambda t: BASE * warmup(t, 5, 0.2),
    ),
    "warmup-cosine": (
        lambda o: WarmupCosine(o, warmup_steps=5, total_steps=20, eta_min=0.001),
        lambda t: (
            BASE * warmup(t, 5, 0.0)
            if t < 5
            else (cosine(t - 5, 15, BASE, 0.001) if t < 20 else 0.001)
        ),
    ),
}


@pytest.mark.parametrize("name", MAKERS)
def test_rates_follow_the_formula(name: str) -> None:
    make, formula = MAKERS[name]
    got = rates(make(optimizer()))
    np.testing.assert_allclose(got, [formula(t) for t in range(STEPS)], rtol=1e-12, atol=1e-15)


def test_warmup_cosine_shape() -> None:
    got = rates(WarmupCosine(optimizer(), warmup_steps=4, total_steps=12), 16)
    assert got[0] == 0.0
    assert got[4] == pytest.approx(BASE)  # the peak, right after warmup
    assert all(a < b for a, b in itertools.pairwise(got[:5]))  # rising
    assert all(a > b for a, b in itertools.pairwise(got[4:13]))  # decaying
    assert got[12:] == [0.0] * 4


TORCH_EQUIVALENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "step": ("StepLR", {"step_size": 4, "gamma": 0.5}),
    "exponential": ("ExponentialLR", {"gamma": 0.9}),
    "cosine": ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.01}),
    "warmup-start": ("LinearLR", {"start_factor": 0.2, "end_factor": 1.0, "total_iters": 5}),
}


@pytest.mark.parametrize("name", TORCH_EQUIVALENTS)
def test_rates_match_torch_schedulers(name: str, torch_reference: Callable[..., Any]) -> None:
    cls, kwargs = TORCH_EQUIVALENTS[name]

    def run(torch: Any) -> list[float]:
        topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=BASE)
        tsched = getattr(torch.optim.lr_scheduler, cls)(topt, **kwargs)
        rates = []
        for _ in range(STEPS):
            rates.append(tsched.get_last_lr()[0])
            topt.step()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tsched.step()
        return rates

    want = torch_reference(run)
    got = rates(MAKERS[name][0](optimizer()))
    # torch updates most schedulers recursively, hence a tolerance above round-off
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", MAKERS)
def test_state_dict_round_trips_through_json(name: str) -> None:
    make, formula = MAKERS[name]
    sched = make(optimizer())
    for _ in range(7):
        sched.step()
    state = json.loads(json.dumps(sched.state_dict()))
    fresh_opt = optimizer()
    resumed = make(fresh_opt)
    resumed.load_state_dict(state)
    assert fresh_opt.lr == sched.optimizer.lr == pytest.approx(formula(7))
    assert rates(resumed, 5) == rates(sched, 5)


def test_load_state_dict_refuses_another_scheduler() -> None:
    state = StepLR(optimizer(), step_size=2).state_dict()
    with pytest.raises(ValueError, match="StepLR"):
        ExponentialLR(optimizer(), gamma=0.5).load_state_dict(state)


def test_bad_settings_raise() -> None:
    with pytest.raises(ValueError, match="step_size"):
        StepLR(optimizer(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(optimizer(), T_max=0)
    with pytest.raises(ValueError, match="warmup_steps < total_steps"):
        WarmupCosine(optimizer(), warmup_steps=10, total_steps=10)
    with pytest.raises(ValueError, match="start_factor"):
        LinearWarmup(optimizer(), warmup_steps=3, start_factor=2.0)
    with pytest.raises(TypeError, match="Optimizer"):
        StepLR(object(), step_size=1)  # type: ignore[arg-type]


def test_a_compiled_step_picks_up_each_new_rate_without_recompiling() -> None:
    model = Linear(2, 1, dtype="float64", rng=0)
    opt = SGD(model.parameters(), lr=BASE)
    sched = StepLR(opt, step_size=1, gamma=0.5)
    g = Graph()
    x, y = g.input("x", (4, 2), "float64"), g.input("y", (4, 1), "float64")
    step = opt.compile(mse_loss(model(x), y))
    program_nodes = step.schedule.nodes
    xs = np.random.default_rng(0).standard_normal((4, 2))
    ys = np.random.default_rng(1).standard_normal((4, 1))
    for k in range(4):
        w = np.array(model.weight.value)
        b = np.array(model.parameters()[1].value)
        r = xs @ w + b - ys
        grad_w = 2.0 / r.size * xs.T @ r
        step(x=xs, y=ys)
        # the parameter change is the gradient scaled by the scheduled rate
        np.testing.assert_allclose(w - model.weight.value, BASE * 0.5**k * grad_w, rtol=1e-12)
        sched.step()
    assert step.schedule.nodes is program_nodes  # the same program throughout
