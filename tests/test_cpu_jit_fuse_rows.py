"""Row fusions (asgrad.tensor.cpu.jit.fuse_rows) against the numpy reference path.

Autograd writes the gradient of a softmax along the last axis as four lines, and a
layer norm's weight gradient as three; on the compiled path each becomes one call of a
fused kernel, and training gives the numpy path's numbers.
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


class _Mix(nn.Module):
    """Scores ``x @ w`` softmaxed along ``axis``, mixing ``x``'s rows."""

    def __init__(self, d: int, t: int, axis: int) -> None:
        super().__init__()
        self.w = nn.Parameter((d, t), nn.init.normal)
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        att = (x @ self.w).softmax(self.axis)
        out: Tensor = att @ x
        return out


def _train(flag: bool, axis: int, dtype: str) -> tuple[list[float], np.ndarray, str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(0)
    model = _Mix(8, 6, axis)
    model.initialize(0)
    model.to(dtype)
    g = Graph()
    x, y = g.input("x", (4, 6, 8), dtype), g.input("y", (4, 6, 8), dtype)
    loss = nn.mse_loss(model(x), y)
    program = nn.SGD(model.parameters(), lr=0.5).compile(loss, backend="cpu")
    feeds = {
        "x": rng.standard_normal((4, 6, 8)).astype(dtype),
        "y": rng.standard_normal((4, 6, 8)).astype(dtype),
    }
    losses = [float(program(feeds)[0]) for _ in range(6)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, model.w.value.copy(), source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_gradient_is_one_kernel_and_trains_as_the_numpy_path(dtype: str) -> None:
    on = _train(True, -1, dtype)
    off = _train(False, -1, dtype)
    assert on[2].count("= _softmax_backward") == 1
    assert "_softmax_backward" not in off[2]
    # the sum along the rows (keepdims) is gone with the product and the difference
    assert "None, True)" in off[2]
    assert "None, True)" not in on[2]
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(on[0], off[0], rtol=tol)
    np.testing.assert_allclose(on[1], off[1], rtol=tol, atol=tol)
    assert on[0][-1] < on[0][0]


def test_a_softmax_along_another_axis_keeps_its_lines() -> None:
    on = _train(True, 1, "float32")
    off = _train(False, 1, "float32")
    assert "_softmax_backward" not in on[2]
    np.testing.assert_allclose(on[0], off[0], rtol=1e-5)


def _train_norm(flag: bool, dtype: str) -> tuple[list[float], list[np.ndarray], str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Tanh(), nn.Linear(16, 3))
    model.initialize(1)
    model.to(dtype)
    g = Graph()
    x, y = g.input("x", (3, 5, 8), dtype), g.input("y", (3, 5, 3), dtype)
    loss = nn.mse_loss(model(x), y)
    params = list(model.parameters())
    program = nn.SGD(params, lr=0.2).compile(loss, backend="cpu")
    feeds = {
        "x": (rng.standard_normal((3, 5, 8)) * 3.0 + 1.0).astype(dtype),
        "y": rng.standard_normal((3, 5, 3)).astype(dtype),
    }
    losses = [float(program(feeds)[0]) for _ in range(6)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, [p.value.copy() for p in params], source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_weight_gradient_is_one_pass_and_trains_as_the_numpy_path(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgrad.tensor.cpu.lowering import FAMILY_LOWERINGS, FamilyLowering

    # this fusion alone (the elementwise lines' folding would remove more lines)
    monkeypatch.setitem(FAMILY_LOWERINGS, "elementwise", FamilyLowering())
    on = _train_norm(True, dtype)
    off = _train_norm(False, dtype)
    assert on[2].count("= _ln_weight_grad") == 1
    assert "_ln_weight_grad" not in off[2]
    # the recomputed x_hat and its product with g go (their lines, nothing else)
    assigned = [sum(" = " in line for line in src.splitlines()) for src in (on[2], off[2])]
    assert assigned[0] == assigned[1] - 2
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(on[0], off[0], rtol=tol)
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert on[0][-1] < on[0][0]
