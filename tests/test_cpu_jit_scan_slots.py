"""A loop step's outputs in the whole step (asgrad.tensor.cpu.jit.emit_scan).

Inside a ``scan`` written as a loop of the whole step, a step's outputs that an
elementwise op (or a ``concat``) computes are written straight into their slots of
the stacked outputs, not into a temporary copied there after (an LSTM's saved gates,
the gates' gradient of its backward step). The steps still compute what the numpy
path does, at float32 and float64.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn  # after the skip
from asgrad.tensor import Graph, Program
from asgrad.tensor.cpu import jit


@pytest.fixture(autouse=True)
def _switch_back() -> Iterator[None]:
    yield
    jit.set_enabled(None)


def _step(mode: str, dtype: str) -> tuple[Program, dict[str, np.ndarray], nn.Module]:
    """An SGD step of a one-layer LSTM or GRU: 3 steps, batch 2, 4 features, hidden 3."""
    layer = nn.LSTM if mode == "lstm" else nn.GRU
    model = layer(4, 3, dtype=dtype, rng=0)
    g = Graph()
    x = g.input("x", (3, 2, 4), dtype, free=())
    target = g.input("target", (3, 2, 3), dtype, free=())
    out, _ = model(x)
    loss = ((out - target) * (out - target)).mean()
    step = nn.SGD(model.parameters(), lr=0.1).compile(loss)
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((3, 2, 4)).astype(dtype),
        "target": rng.standard_normal((3, 2, 3)).astype(dtype),
    }
    return step, feeds, model


def _losses_and_weights(mode: str, dtype: str, flag: bool) -> tuple[list[float], list[Any], Any]:
    jit.set_enabled(flag)
    step, feeds, model = _step(mode, dtype)
    losses = [float(step(feeds)[0]) for _ in range(3)]
    fn = step.executable.function(feeds)  # type: ignore[attr-defined]
    return losses, [np.array(p.value) for _, p in model.named_parameters()], fn


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loop_steps_writing_their_slots_train_as_on_numpy(mode: str, dtype: str) -> None:
    got, got_w, fn = _losses_and_weights(mode, dtype, True)
    assert fn.whole_step_active(), fn.step_declined
    want, want_w, _ = _losses_and_weights(mode, dtype, False)
    rtol = 2e-5 if dtype == "float32" else 1e-11
    np.testing.assert_allclose(got, want, rtol=rtol)
    for a, b in zip(got_w, want_w, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


@pytest.mark.slow
def test_an_lstm_step_writes_its_saved_gates_into_their_slots() -> None:
    """The forward step holds no copy loop into the stacked outputs: each gate's loop
    writes its slot, and the new hidden state's too."""
    _, _, fn = _losses_and_weights("lstm", "float64", True)
    assert fn.whole_step_active(), fn.step_declined
    lines = fn.step_plan.source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("for t"))
    t = lines[start].split()[1]
    depth = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line)
    writes = [line.strip() for line in body if "] = " in line and f"{t} * " in line.split("=")[0]]
    # the saved h and c (copies of the carries), then i, f, g, o, tanh(c') and h'
    copies = [w for w in writes if w.split(" = ")[1].startswith("W_float64[")]
    assert len(writes) == 8, "\n".join(body)
    assert len(copies) == 2, "\n".join(copies)
