"""Views a GPU plan passes on as strides: slices and reshapes read by
matmuls and elementwise kernels, and a slice's gradient (the sum of scatter_slices of
attention's q, k and v) written piece by piece into one buffer."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, compile

pytestmark = pytest.mark.gpu


def _qkv_program(backend: str, pieces: int) -> tuple[object, dict[str, np.ndarray]]:
    B, T, D, h = 2, 5, 6, 2
    g = Graph()
    x = g.input("x", (B, T, 3 * D), free=())
    w = g.input("w", (B, T, D), free=())
    q, k, v = (
        x[:, :, i * D : (i + 1) * D].reshape(B, T, h, D // h).transpose(0, 2, 1, 3)
        for i in range(3)
    )
    att = q @ k.swapaxes(-1, -2)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    loss = (y * w).sum()
    if pieces == 2:  # the v slice unused: its part of the gradient stays zero
        loss = ((q @ k.swapaxes(-1, -2)) * w[:, :1, :1]).sum()
    (dx,) = grad(loss, [x])
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((B, T, 3 * D)).astype(np.float32),
        "w": rng.standard_normal((B, T, D)).astype(np.float32),
    }
    return compile([loss, dx], backend=backend), feeds


@pytest.mark.parametrize("pieces", [3, 2])
def test_slices_and_their_gradient_match_the_cpu(device: Device, pieces: int) -> None:
    gpu, feeds = _qkv_program("gpu", pieces)
    cpu, _ = _qkv_program("cpu", pieces)
    got, want = gpu(feeds), cpu(feeds)  # type: ignore[operator]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    plan = build_plan(gpu.executable.schedule, feeds, device)  # type: ignore[attr-defined]
    kinds = count_kinds(plan.commands)
    # no slice of x is copied; the gradient's pieces go straight into one buffer:
    # zeros only where no piece lands
    assert kinds["fill"] == (0 if pieces == 3 else 1), kinds
    assert kinds["copy"] == 0
