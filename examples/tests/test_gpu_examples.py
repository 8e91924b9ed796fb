"""The examples train on the GPU with the CPU's loss trajectory (same seed, 20 steps)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

from asgrad import nn
from asgrad.examples import cnn, transformer, xor
from asgrad.gpu import Device, GpuUnavailableError, get_device
from asgrad.tensor import Graph

pytestmark = pytest.mark.gpu
STEPS = 20
RTOL = 1e-3


@pytest.fixture(scope="module")
def device() -> Device:
    """The GPU device; skips (or fails, under ASGRAD_REQUIRE_GPU=1) without an adapter."""
    try:
        return get_device()
    except GpuUnavailableError as exc:
        if os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0"):
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter: {exc}")
        pytest.skip(f"no GPU adapter: {exc}")


def _assert_same_trajectory(run: Callable[[str], list[float]]) -> None:
    cpu, gpu = run("cpu"), run("gpu")
    assert len(cpu) == len(gpu) == STEPS
    np.testing.assert_allclose(gpu, cpu, rtol=RTOL)


def test_xor_trains_on_the_gpu_like_on_the_cpu(device: Device) -> None:
    def run(backend: str) -> list[float]:
        result = xor.train(STEPS, 0, backend, target_loss=0.0)
        losses: list[float] = result["losses"]
        return losses

    _assert_same_trajectory(run)


def test_cnn_trains_on_the_gpu_like_on_the_cpu(device: Device) -> None:
    rng = np.random.default_rng(0)
    images = rng.random((STEPS, 16, 1, 8, 8), dtype=np.float32)
    labels = rng.integers(0, 10, (STEPS, 16))

    def run(backend: str) -> list[float]:
        model = cnn.build_model((8, 8), 0)
        g = Graph("cnn-parity")
        x, y = g.input("x", (16, 1, 8, 8)), g.input("y", (16,), "int64")
        step = nn.Adam(model.parameters(), lr=2e-3).compile(
            nn.cross_entropy(model(x), y), backend=backend
        )
        return [float(step(x=images[i], y=labels[i])[0]) for i in range(STEPS)]

    _assert_same_trajectory(run)


# Over 30 s on lavapipe: the same training on the CPU and on the (software) GPU.
def test_transformer_trains_on_the_gpu_like_on_the_cpu(device: Device) -> None:
    def run(backend: str) -> list[float]:
        result = transformer.train(
            STEPS,
            0,
            backend,
            batch_size=4,
            context=16,
            dim=32,
            num_heads=2,
            num_layers=1,
            sample_length=1,
        )
        losses: list[float] = result["losses"]
        return losses

    _assert_same_trajectory(run)
