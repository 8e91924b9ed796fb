"""backend='gpu' trains device-resident: a regression step with gradients from autograd,
and a small network whose activations and their gradients are matmul epilogues.

Needs ``asgrad.autograd`` and ``asgrad.nn`` as well as ``asgrad.gpu``, hence here rather
than in ``packages/gpu/tests``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.gpu import Device, variable_store
from asgrad.gpu.plan import build_plan, fusion
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Variable, compile, evaluate
from asgrad.tensor.runtime.executor import Program

pytestmark = pytest.mark.gpu


def _sgd_program(backend: str) -> tuple[Program, Variable, Variable]:
    """A linear regression step: loss = mean((x @ w + b - y)^2), w -= 0.1 dL/dw."""
    rng = np.random.default_rng(0)
    w = Variable("w", rng.standard_normal((3, 1)).astype(np.float32))
    b = Variable("b", np.zeros((1,), np.float32))
    g = Graph("regression")
    x, y = g.input("x", (8, 3)), g.input("y", (8, 1))
    wt, bt = g.parameter("w", variable=w), g.parameter("b", variable=b)
    err = x @ wt + bt - y
    loss = (err * err).mean()
    dw, db = grad(loss, [wt, bt])
    program = compile([loss], {w: wt - dw * 0.1, b: bt - db * 0.1}, backend=backend)
    return program, w, b


def _batch(step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(step)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    return {"x": x, "y": (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3)}


def test_training_step_moves_only_the_batch_and_the_loss(device: Device) -> None:
    program, w, _ = _sgd_program("gpu")
    program(_batch(0))  # first step: compiles the plan, uploads the parameters
    before = device.counter.snapshot()
    steps = 5
    for step in range(1, steps + 1):
        program(_batch(step))
    moved = device.counter - before
    assert moved.uploads == 2 * steps  # x and y, nothing else
    assert moved.upload_bytes == steps * (8 * 3 + 8) * 4
    assert moved.readbacks == steps  # the loss, one mapping per step
    assert moved.readback_bytes == steps * 4
    assert w.holder is variable_store(device)  # the newest value is on the device


def test_parameters_match_the_cpu_after_training(device: Device) -> None:
    gpu_program, gw, gb = _sgd_program("gpu")
    cpu_program, cw, cb = _sgd_program("cpu")
    gpu_losses = [float(gpu_program(_batch(s))[0]) for s in range(20)]
    cpu_losses = [float(cpu_program(_batch(s))[0]) for s in range(20)]
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    before = device.counter.readbacks
    np.testing.assert_allclose(gw.value, cw.value, rtol=1e-4, atol=1e-6)  # fetched once
    np.testing.assert_allclose(gb.value, cb.value, rtol=1e-4, atol=1e-6)
    assert device.counter.readbacks == before + 2
    assert gw.holder is None  # the host has the newest value again


def test_host_assignment_is_uploaded_before_the_next_run(device: Device) -> None:
    program, w, _ = _sgd_program("gpu")
    program(_batch(0))
    w.value = np.zeros((3, 1), np.float32)
    g = Graph("read")
    out = g.parameter("w", variable=w) * 1.0
    (value,) = evaluate([out], {}, backend="gpu")
    np.testing.assert_array_equal(value, np.zeros((3, 1), np.float32))


def test_update_rules_write_their_variable_in_place(device: Device) -> None:
    program, w, b = _sgd_program("gpu")
    program(_batch(0))
    store = variable_store(device)
    buffers = (store.array(w).buffer, store.array(b).buffer)
    before = device.counter.dispatches
    program(_batch(1))
    per_step = device.counter.dispatches - before
    program(_batch(2))
    assert (store.array(w).buffer, store.array(b).buffer) == buffers
    assert device.counter.dispatches - before == 2 * per_step
    # forward, backward and both updates, fused; no copies (8 on lavapipe; 7 while a
    # matmul's epilogue read other operands: x @ w + b - y stored by the product's kernel)
    assert per_step <= 8


def test_backward_activation_gradients_are_matmul_epilogues(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With epilogues that read operands besides the product (off by default: see
    `asgrad.gpu.plan.fusion.EPILOGUE_LEAVES`), in a training step ``relu(x @ W + b)``
    and ``gelu(h @ W + b)`` are the epilogues of their products, and the gradient
    through the ReLU, ``(dy @ W^T) * (h > 0)``, of its product: the steps match the
    CPU's."""

    def train(backend: str) -> tuple[list[np.ndarray], Any]:
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.GELU())
        model.initialize(0)
        g = Graph()
        x, y = g.input("x", (5, 6)), g.input("y", (5, 8))
        step = nn.SGD(model.parameters(), lr=0.1).compile(nn.mse_loss(model(x), y), backend=backend)
        rng = np.random.default_rng(4)
        feeds = {
            "x": rng.standard_normal((5, 6)).astype(np.float32),
            "y": rng.standard_normal((5, 8)).astype(np.float32),
        }
        for _ in range(3):
            step(feeds)
        return [np.array(p.value) for p in model.parameters()], (step, feeds)

    monkeypatch.setattr(fusion, "EPILOGUE_LEAVES", 8)
    cpu, _ = train("cpu")
    gpu, (step, feeds) = train("gpu")
    for c, v in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(v, c, rtol=1e-4, atol=1e-5)
    kinds = count_kinds(build_plan(step.executable.schedule, feeds, device).commands)
    # forward: both products store bias + activation (the first keeping the product,
    # which the ReLU's gradient reads again); backward: the gradient through the ReLU in
    # the epilogue of dy @ W^T; one elementwise kernel left (the loss's gradient),
    # four on lavapipe before the epilogues, and no product launched twice
    assert kinds["elementwise"] <= 1, kinds
    assert kinds["matmul"] == 5, kinds
