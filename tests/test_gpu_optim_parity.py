"""Adadelta, Adagrad, Adamax, NAdam and RAdam on the GPU against the CPU (float32)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.nn import Adadelta, Adagrad, Adamax, Linear, NAdam, Optimizer, RAdam, mse_loss
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
