"""Elementwise producers folded into their readers (asgrad.tensor.cpu.jit.fuse_elementwise)
against the numpy reference path.

A bias add read by GELU and by GELU's gradient, and a bias add read by a residual sum,
are separate lines on the numpy path; on the compiled path each reader is one rendered
loop of the composed expression, and training gives the separate compiled lines'
numbers bit for bit (the composed loop rounds each intermediate as the lines did),
the numpy path's within rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn
from asgrad.tensor import Graph, Tensor
from asgrad.tensor.cpu import jit

pytestmark = pytest.mark.usefixtures("line_path")


@pytest.fixture(autouse=True)
def _small_results_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' small values fold (the default threshold is for speed)."""
    from asgrad.tensor.cpu.jit import fuse_elementwise

    monkeypatch.setattr(fuse_elementwise, "FOLD_MIN_ELEMENTS", 1)


class _Residual(nn.Module):
    """``x + W2 gelu(W1 x + b1) + b2``: bias adds read by GELU, its gradient and a sum."""

    def __init__(self, d: int, ff: int) -> None:
        super().__init__()
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = x + self.ff2(self.ff1(x).gelu())
        return out


def _train(flag: bool, dtype: str) -> tuple[list[float], list[np.ndarray], str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(0)
    model = _Residual(4, 8)
    model.initialize(0)
    model.to(dtype)
    g = Graph()
    x, y = g.input("x", (3, 5, 4), dtype), g.input("y", (3, 5, 4), dtype)
    loss = nn.mse_loss(model(x), y)
    params = list(model.parameters())
    program = nn.SGD(params, lr=0.1).compile(loss, backend="cpu")
    feeds = {
        "x": rng.standard_normal((3, 5, 4)).astype(dtype),
        "y": rng.standard_normal((3, 5, 4)).astype(dtype),
    }
    losses = [float(program(feeds)[0]) for _ in range(4)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, [p.value.copy() for p in params], source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bias_adds_fold_into_their_readers_and_train_as_the_separate_lines(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgrad.tensor.cpu.lowering import FAMILY_LOWERINGS, FamilyLowering

    on = _train(True, dtype)
    off = _train(False, dtype)
    with monkeypatch.context() as m:  # the compiled path without this fusion
        m.setitem(FAMILY_LOWERINGS, "elementwise", FamilyLowering())
        apart = _train(True, dtype)
    assert "_chain" not in off[2]
    assert "_chain" not in apart[2]
    chains = [line for line in on[2].splitlines() if "= _chain" in line]
    # gelu(x W1 + b1), its gradient at x W1 + b1, and x + (h W2 + b2)
    assert len(chains) >= 3
    assigned = [sum(" = " in line for line in src.splitlines()) for src in (on[2], apart[2])]
    assert assigned[0] < assigned[1]
    np.testing.assert_array_equal(on[0], apart[0])
    for a, b in zip(on[1], apart[1], strict=True):
        np.testing.assert_array_equal(a, b)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(on[0], off[0], rtol=tol)
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert on[0][-1] < on[0][0]


class _Gate(nn.Module):
    """``s * a + s`` for ``s = sigmoid(a)``: a producer of several primitives, read twice."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x: Tensor) -> Tensor:
        a = self.lin(x)
        s = a.sigmoid()
        out: Tensor = s * a + s
        return out


def test_small_results_keep_their_lines_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from asgrad.tensor.cpu.jit import fuse_elementwise

    monkeypatch.setattr(fuse_elementwise, "FOLD_MIN_ELEMENTS", 3 * 5 * 8 + 1)
    assert "_chain" not in _train(True, "float32")[2]


def test_a_producer_of_several_primitives_read_twice_keeps_its_line() -> None:
    from asgrad.tensor.cpu.jit.fuse_elementwise import MAX_REPEATED
    from asgrad.tensor.cpu.jit.render import primitives
    from asgrad.tensor.ir.scalar import arg
    from asgrad.tensor.ops.elementwise import sigmoid_expr

    assert len(primitives(sigmoid_expr(arg(0)))) > MAX_REPEATED
    results = []
    for flag in (True, False):
        jit.set_enabled(flag)
        model = _Gate(4)
        model.initialize(0)
        g = Graph()
        x, y = g.input("x", (3, 4), "float32"), g.input("y", (3, 4), "float32")
        loss = nn.mse_loss(model(x), y)
        program = nn.SGD(list(model.parameters()), lr=0.1).compile(loss, backend="cpu")
        rng = np.random.default_rng(1)
        feeds = {k: rng.standard_normal((3, 4)).astype("float32") for k in ("x", "y")}
        losses = [float(program(feeds)[0]) for _ in range(3)]
        executable: Any = program.executable
        source: str = executable.function(feeds).source
        (at,) = [i for i, n in enumerate(program.schedule.nodes) if n.op == "sigmoid"]
        assert f"v{at} = " in source  # computed once, not in each reader
        results.append(losses)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
