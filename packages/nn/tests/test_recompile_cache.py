"""A graph rebuilt inside the training loop (PyTorch's define-by-run habit) that has the
structure of one compiled before gets that program back from ``Optimizer.compile``; a
graph that differs (a constant, an input's shape, a setting) gets its own."""

from __future__ import annotations

from typing import Any

import numpy as np

from asgrad import nn
from asgrad.tensor import Graph, Tensor


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 5, rng=0), nn.Tanh(), nn.Linear(5, 2, rng=1))


def _loss(model: nn.Module, scale: float = 1.0) -> Tensor:
    g = Graph()
    x, y = g.input("x", (4, 3)), g.input("y", (4,), "int64")
    out: Tensor = model(x) * scale
    loss: Tensor = nn.CrossEntropyLoss()(out, y)
    return loss


def _batch(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {"x": rng.standard_normal((4, 3)).astype(np.float32), "y": rng.integers(0, 2, 4)}


def test_rebuilding_the_graph_each_step_trains_as_compiling_once() -> None:
    once, rebuilt = _model(), _model()
    opt_once = nn.Adam(once.parameters(), lr=0.1)
    opt_rebuilt = nn.Adam(rebuilt.parameters(), lr=0.1)
    step = opt_once.compile(_loss(once))
    programs = set()
    for i in range(4):
        want = step(**_batch(i))[0]
        again = opt_rebuilt.compile(_loss(rebuilt))
        programs.add(id(again))
        np.testing.assert_array_equal(again(**_batch(i))[0], want)
    assert len(programs) == 1
    for a, b in zip(once.parameters(), rebuilt.parameters(), strict=True):
        np.testing.assert_array_equal(a.value, b.value)


def test_a_different_constant_or_setting_compiles_a_new_program() -> None:
    model = _model()
    opt = nn.SGD(model.parameters(), lr=0.1)
    first = opt.compile(_loss(model))
    assert opt.compile(_loss(model)) is first
    assert opt.compile(_loss(model, scale=2.0)) is not first
    opt.clip_grad_norm = 1.0  # baked into the update graph
    assert opt.compile(_loss(model)) is not first
    opt.lr = 0.5  # read when the step runs: no new program needed
    opt.clip_grad_norm = None
    assert opt.compile(_loss(model)) is first
