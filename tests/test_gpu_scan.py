"""Loops on the GPU: scans (nested, reversed), the recurrent layers and their gradients
against the CPU. The registry's parity and gradient tests cover the ops' own cases."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.nn import GRU, LSTM
from asgrad.tensor import Graph, Tensor, compile, fori_loop, scan

RNG = np.random.default_rng(0)


def _both(outputs: list[Tensor], feeds: dict[str, np.ndarray]) -> None:
    cpu = compile(outputs, backend="cpu")(feeds)
    gpu_prog = compile(outputs, backend="gpu")
    for _ in range(2):  # a plan replayed: the carries start from the feeds again
        gpu = gpu_prog(feeds)
        for c, d in zip(cpu, gpu, strict=True):
            np.testing.assert_allclose(d, c, rtol=2e-4, atol=2e-5)


@pytest.mark.gpu
def test_nested_reversed_scan_and_fori_loop(device: Device) -> None:
    g = Graph()
    w = g.input("w", (3,), free=())
    xs = g.input("xs", (4, 5, 3), free=())

    def outer(c: Tensor, row: Tensor) -> tuple[Tensor, Tensor]:
        inner, ys = scan(lambda d, x: ((d * w + x).tanh(), d.sum()), c, row, reverse=True)
        return inner, ys * 2.0

    c, sums = scan(outer, g.constant(np.zeros(3, np.float32)), xs)
    counted = fori_loop(0, 3, lambda i, v: v * 0.5 + i.cast("float32"), c)
    loss = (sums * sums).sum() + counted.sum()
    feeds = {"w": RNG.standard_normal(3).astype(np.float32)}
    feeds["xs"] = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    _both([c, sums, counted, *grad(loss, [w, xs])], feeds)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", [LSTM, GRU])
def test_recurrent_layer_and_gradients_on_gpu(device: Device, cls: type) -> None:
    layer = cls(4, 6, num_layers=2, bidirectional=True, batch_first=True, rng=0)
    g = Graph()
    x = g.input("x", (3, 7, 4))
    mask = g.input("mask", (3, 7), "bool")
    out, state = layer(x, mask=mask)
    h = state[0] if isinstance(state, tuple) else state
    loss = (out * out).sum() + h.sum()
    params = [g.bind(p) for p in layer.parameters()]
    valid = np.arange(7)[None, :] < np.array([7, 3, 5])[:, None]
    feeds = {"x": RNG.standard_normal((3, 7, 4)).astype(np.float32), "mask": valid}
    _both([out, h, *grad(loss, [x, *params])], feeds)
