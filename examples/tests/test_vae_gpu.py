"""The VAE trains on the GPU with the CPU's loss trajectory: the same noise is drawn."""

from __future__ import annotations

import os

import numpy as np
import pytest

from asgrad import nn
from asgrad.examples import vae
from asgrad.examples.cnn import load_digits_split
from asgrad.gpu import GpuUnavailableError, get_device
from asgrad.tensor import Graph, seed_stream

pytestmark = pytest.mark.gpu


def _losses(backend: str, steps: int = 20) -> list[float]:
    x = load_digits_split(0).x_train.reshape(-1, 64)
    model = vae.VAE(64, seed=0)
    g = Graph()
    seed_stream(g, 3)
    xt = g.input("x", (32, 64))
    recon, mu, logvar = model(xt)
    step = nn.Adam(model.parameters()).compile(
        vae.loss_function(recon, xt, mu, logvar), backend=backend
    )
    return [float(step(x=x[32 * i : 32 * (i + 1)])[0]) for i in range(steps)]


def test_vae_trains_on_the_gpu_like_on_the_cpu() -> None:
    try:
        get_device()
    except GpuUnavailableError as exc:
        if os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0"):
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter: {exc}")
        pytest.skip(f"no GPU adapter: {exc}")
    cpu, gpu = _losses("cpu"), _losses("gpu")
    assert cpu[-1] < cpu[0]
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4)
