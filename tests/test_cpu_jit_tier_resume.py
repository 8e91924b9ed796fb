"""Training on the tiered CPU path, resumed from saved state, continues bit for bit.

The optimizer's step counter (``optimizer.step``, in its state_dict) decides when a
training step leaves the numpy tier, so a resumed run (fresh model, optimizer and
program, state loaded) runs each step on the tier the uninterrupted run used, before
and after the switch.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph, Program
from asgrad.tensor.cpu import CPUExecutable, jit

pytest.importorskip("numba")

AT = 4  # steps on the numpy tier


@pytest.fixture(autouse=True)
def _tiered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(jit, "TIER_UP_AT", AT)
    jit.set_enabled("lazy")
    yield
    jit.set_enabled(None)


def _setup(seed: int) -> tuple[nn.Module, nn.Optimizer, Program]:
    model = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 2))
    model.initialize(seed)
    g = Graph()
    x, y = g.input("x", (8, 3)), g.input("y", (8,), "int64")
    opt = nn.AdamW(model.parameters(), lr=1e-2)
    return model, opt, opt.compile(nn.cross_entropy(model(x), y))


def _run(step: Program, rng: np.random.Generator, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        x = rng.standard_normal((8, 3)).astype(np.float32)
        losses.append(float(step(x=x, y=(x[:, 0] > 0).astype(np.int64))[0]))
    return losses


@pytest.mark.parametrize("saved_at", [2, AT + 2])
def test_a_resumed_run_continues_bit_for_bit_across_the_tier_switch(saved_at: int) -> None:
    model, opt, step = _setup(0)
    rng = np.random.default_rng(7)
    _run(step, rng, saved_at)
    model_state, opt_state = model.state_dict(), opt.state_dict()
    rng_state = rng.bit_generator.state
    expected = _run(step, rng, 2 * AT)
    assert isinstance(step.executable, CPUExecutable)
    fn = step.executable.function({"x": np.zeros((8, 3), np.float32), "y": np.zeros(8, np.int64)})
    assert fn.tier() == "compiled"

    model2, opt2, step2 = _setup(seed=123)
    model2.load_state_dict(model_state)
    opt2.load_state_dict(opt_state)
    rng2 = np.random.default_rng()
    rng2.bit_generator.state = rng_state
    resumed = _run(step2, rng2, 2 * AT)

    assert resumed == expected
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(model2.state_dict()[name], value, err_msg=name)
