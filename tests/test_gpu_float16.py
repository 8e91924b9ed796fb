"""A float16 transformer block's forward and backward on the GPU match the CPU's float16
reference, and float16 training steps (float16 variables, and float32 variables used in
float16) update their variables as the CPU's do."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.tensor import Graph, Tensor, Variable, compile, evaluate
from asgrad.tensor.api.nn_functional import layer_norm

pytestmark = pytest.mark.gpu

# Two float16 steps of the largest entry: the GPU's f32 transcendental functions and
# sums in another order may round a value one step apart, and a gradient carries it on.
RTOL = 2e-3


def _block(x: Tensor, wq: Tensor, wk: Tensor, w1: Tensor, b1: Tensor, w2: Tensor) -> Tensor:
    h = layer_norm(x)
    scores = ((h @ wq) @ (h @ wk).mT * 0.25).softmax(axis=-1)
    a = scores @ h + x
    m = (layer_norm(a) @ w1 + b1).gelu() @ w2 + a
    return (m * m).mean() + m.log_softmax(axis=-1).mean()


def test_float16_block_forward_and_backward_match_the_cpu(device: Device) -> None:
    rng = np.random.default_rng(0)
    shapes = {"x": (2, 8, 16), "wq": (16, 16), "wk": (16, 16), "w1": (16, 64)}
    shapes |= {"b1": (64,), "w2": (64, 16)}
    feeds = {k: (rng.standard_normal(s) * 0.3).astype(np.float16) for k, s in shapes.items()}
    g = Graph()
    ins = [g.input(k, s, "float16") for k, s in shapes.items()]
    loss = _block(*ins)
    outs = [loss, *grad(loss, ins)]
    cpu = evaluate(outs, feeds, backend="cpu")
    gpu = evaluate(outs, feeds, backend="gpu")
    for want, got in zip(cpu, gpu, strict=True):
        assert got.dtype == want.dtype == np.float16
        scale = float(np.abs(want.astype(np.float32)).max())
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), 0, RTOL * scale)


def _train(backend: str) -> tuple[list[float], np.ndarray]:
    rng = np.random.default_rng(1)
    w = Variable("w", (rng.standard_normal((8, 4)) * 0.5).astype(np.float16))
    g = Graph()
    x, y = g.input("x", (16, 8), "float16"), g.input("y", (16, 4), "float16")
    weight = g.bind(w)
    p = (x @ weight).tanh()
    loss = ((p - y) * (p - y)).mean()
    (gw,) = grad(loss, [weight])
    step = compile([loss], updates={w: weight - gw * 0.5}, backend=backend)
    feeds = {
        "x": rng.standard_normal((16, 8)).astype(np.float16),
        "y": rng.standard_normal((16, 4)).astype(np.float16),
    }
    losses = [float(step.run(feeds)[0]) for _ in range(5)]
    return losses, w.value


def test_float16_training_step_updates_variables_as_the_cpu(device: Device) -> None:
    cpu_losses, cpu_w = _train("cpu")
    gpu_losses, gpu_w = _train("gpu")
    assert gpu_w.dtype == np.float16
    assert gpu_losses[-1] < gpu_losses[0]
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=RTOL)
    np.testing.assert_allclose(gpu_w.astype(np.float32), cpu_w.astype(np.float32), RTOL, 1e-3)


def _master_weights(backend: str) -> tuple[list[float], list[np.ndarray]]:
    """float32 weights, used in float16, updated from their float16 gradients (the
    multi-tensor update reads them as f16 leaves)."""
    rng = np.random.default_rng(2)
    weights = [
        Variable(f"w{i}", (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)) for i in range(3)
    ]
    g = Graph()
    h = g.input("x", (16, 8), "float16")
    bound = [g.bind(w) for w in weights]
    halves = [w.cast("float16") for w in bound]
    for w in halves:
        h = (h @ w).tanh()
    loss = (h * h).mean()
    grads = grad(loss, halves)
    updates = {
        v: w - d.cast("float32") * 0.5 for v, w, d in zip(weights, bound, grads, strict=True)
    }
    step = compile([loss], updates=updates, backend=backend)
    feeds = {"x": rng.standard_normal((16, 8)).astype(np.float16)}
    losses = [float(step.run(feeds)[0]) for _ in range(4)]
    return losses, [w.value for w in weights]


def test_float32_weights_follow_their_float16_gradients_as_on_the_cpu(device: Device) -> None:
    cpu_losses, cpu_weights = _master_weights("cpu")
    gpu_losses, gpu_weights = _master_weights("gpu")
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=RTOL)
    for got, want in zip(gpu_weights, cpu_weights, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
