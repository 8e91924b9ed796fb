"""A training run saved mid-way and resumed in a fresh process state continues identically.

Model (with dropout, whose seed is a buffer), AdamW state, scheduler state, step and
the data RNG all go through one CheckpointManager checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asgrad import nn
from asgrad.nn.schedulers import WarmupCosine
from asgrad.nn.serialization import CheckpointManager
from asgrad.tensor import Graph, Program


def _setup(seed: int) -> tuple[nn.Module, nn.Optimizer, WarmupCosine, Program]:
    model = nn.Sequential(nn.Linear(3, 16), nn.GELU(), nn.Dropout(0.2), nn.Linear(16, 2))
    model.initialize(seed)
    g = Graph()
    x, y = g.input("x", (8, 3)), g.input("y", (8,), "int64")
    loss = nn.cross_entropy(model(x), y)
    opt = nn.AdamW(model.parameters(), lr=1e-2)
    sched = WarmupCosine(opt, warmup_steps=3, total_steps=20)
    return model, opt, sched, opt.compile(loss)


def _run(step: Program, sched: WarmupCosine, rng: np.random.Generator, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        x = rng.standard_normal((8, 3)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64)
        losses.append(float(step(x=x, y=y)[0]))
        sched.step()
    return losses


def test_resume_from_checkpoint_continues_bit_identically(tmp_path: Path) -> None:
    model, opt, sched, step = _setup(0)
    rng = np.random.default_rng(42)
    _run(step, sched, rng, 6)
    manager = CheckpointManager(tmp_path, keep_last=2)
    manager.save(
        6, model.state_dict(), opt.state_dict(), sched.state_dict(), rng=rng, metrics={"loss": 1.0}
    )
    expected = _run(step, sched, rng, 6)

    model2, opt2, sched2, step2 = _setup(seed=123)  # different initial weights on purpose
    data = manager.load("latest")
    assert data.step == 6
    model2.load_state_dict(data.model_state)
    assert data.optimizer_state is not None
    assert data.scheduler_state is not None
    opt2.load_state_dict(data.optimizer_state)
    sched2.load_state_dict(data.scheduler_state)
    resumed = _run(step2, sched2, data.restore_rng(), 6)

    np.testing.assert_array_equal(resumed, expected)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(model2.state_dict()[name], value, err_msg=name)
