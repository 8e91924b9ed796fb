"""A convolution's training step on the GPU: the weight gradient of a first
convolution (few outputs, K = batch * pixels) runs as the small split tile over many
pieces of K in the step's plan, and the step matches the CPU's.

Needs ``asgrad.nn`` as well as ``asgrad.gpu``, hence here rather than in
``packages/gpu/tests``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.linalg import MAX_SPLITS, TINY
from asgrad.gpu.plan import build_plan
from asgrad.tensor import Graph

pytestmark = pytest.mark.gpu


def test_a_first_convolution_weight_gradient_runs_split_in_the_step(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tuning.ENV, "0")

    def train(backend: str) -> tuple[list[np.ndarray], Any]:
        model = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1, rng=0), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 14 * 14, 3)
        )
        model.initialize(0)
        g = Graph()
        x, y = g.input("x", (16, 1, 14, 14)), g.input("y", (16, 3))
        step = nn.SGD(model.parameters(), lr=0.05).compile(
            nn.mse_loss(model(x), y), backend=backend
        )
        rng = np.random.default_rng(5)
        feeds = {
            "x": rng.standard_normal((16, 1, 14, 14)).astype(np.float32),
            "y": rng.standard_normal((16, 3)).astype(np.float32),
        }
        for _ in range(2):
            step(feeds)
        return [np.array(p.value) for p in model.parameters()], (step, feeds)

    cpu, _ = train("cpu")
    gpu, (step, feeds) = train("gpu")
    for c, v in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(v, c, rtol=1e-4, atol=1e-5)
    commands = build_plan(step.executable.schedule, feeds, device).commands
    split = [c for c in commands if str(c[-1]).startswith(f"linalg_matmul {TINY} k k")]
    assert len(split) == 1  # the weight gradient: 4 x 9 outputs, K = 16 * 196
    groups = split[0][2]
    assert groups[0] * groups[1] == 1  # one tile
    assert groups[2] > MAX_SPLITS  # many pieces of K
