"""Adadelta, Adagrad, Adamax, NAdam and RAdam on the GPU against the CPU (float32)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.nn import (
    LBFGS,
    Adadelta,
    Adagrad,
    Adamax,
    Linear,
    NAdam,
    Optimizer,
    RAdam,
    mse_loss,
)
from asgrad.tensor import Graph

pytestmark = pytest.mark.gpu

CONFIGS: list[tuple[type[Optimizer], dict[str, Any]]] = [
    (Adadelta, {"weight_decay": 0.1}),
    (Adagrad, {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.1}),
    (Adamax, {"lr": 0.05, "weight_decay": 0.1}),
    (NAdam, {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (RAdam, {"lr": 0.05, "betas": (0.9, 0.5), "weight_decay": 0.1}),
]


def _train(cls: type[Optimizer], kwargs: dict[str, Any], backend: str) -> list[np.ndarray]:
    model = Linear(4, 3, rng=0)
    g = Graph()
    x, y = g.input("x", (16, 4)), g.input("y", (16, 3))
    step = cls(model.parameters(), **kwargs).compile(mse_loss(model(x), y), backend=backend)
    rng = np.random.default_rng(1)
    for _ in range(8):
        step(
            x=rng.standard_normal((16, 4)).astype(np.float32),
            y=rng.standard_normal((16, 3)).astype(np.float32),
        )
    return [np.array(p.value) for p in model.parameters()]


@pytest.mark.parametrize(("cls", "kwargs"), CONFIGS, ids=[c.__name__ for c, _ in CONFIGS])
def test_gpu_steps_match_the_cpu(
    device: Device, cls: type[Optimizer], kwargs: dict[str, Any]
) -> None:
    cpu, gpu = _train(cls, kwargs, "cpu"), _train(cls, kwargs, "gpu")
    moved = [np.abs(c - Linear(4, 3, rng=0).parameters()[i].value).max() for i, c in enumerate(cpu)]
    assert min(moved) > 1e-3  # the steps did move the parameters
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def _lbfgs(backend: str) -> tuple[list[float], list[np.ndarray]]:
    model = Linear(4, 3, rng=0)
    g = Graph()
    x, y = g.input("x", (16, 4)), g.input("y", (16, 3))
    opt = LBFGS(model.parameters(), max_iter=5, line_search_fn="strong_wolfe")
    evaluate = opt.compile(mse_loss(model(x), y), backend=backend)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    ys = (xs @ rng.standard_normal((4, 3))).astype(np.float32)
    losses = [opt.step(lambda: evaluate(x=xs, y=ys)) for _ in range(3)]
    return losses, [np.array(p.value) for p in model.parameters()]


def test_lbfgs_runs_its_program_on_the_gpu(device: Device) -> None:
    cpu_losses, cpu = _lbfgs("cpu")
    gpu_losses, gpu = _lbfgs("gpu")
    assert gpu_losses[-1] < 0.01 * gpu_losses[0]
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-6)
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-4)
