"""Attention's scaled, masked softmax (asgrad.tensor.cpu.jit.fuse_attention) against
the numpy reference path.

``softmax(scores * scale + mask)`` with a constant mask is three lines on the numpy
path; on the compiled path it is one call of a row kernel, and training gives the
numpy path's numbers.
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

T = 6


def _causal(dtype: str, fill: float = -np.inf, shape: tuple[int, ...] = (T, T)) -> np.ndarray:
    mask = np.triu(np.full((T, T), fill), 1).astype(dtype)
    return np.broadcast_to(mask, shape).copy()


class _Attend(nn.Module):
    """Causal attention of ``x`` over itself: scores ``(x w) x^T * scale + mask``."""

    def __init__(self, d: int, mask: np.ndarray, scale: float | None) -> None:
        super().__init__()
        self.w = nn.Parameter((d, d), nn.init.normal)
        self.mask, self.scale = mask, scale

    def forward(self, x: Tensor) -> Tensor:
        scores = (x @ self.w) @ x.swapaxes(-1, -2)
        if self.scale is not None:
            scores = scores * self.scale
        att = (scores + x.graph.constant(self.mask, str(self.mask.dtype))).softmax(-1)
        out: Tensor = att @ x
        return out


def _train(
    flag: bool, dtype: str, mask: np.ndarray, scale: float | None = 0.5
) -> tuple[list[float], np.ndarray, str]:
    jit.set_enabled(flag)
    rng = np.random.default_rng(0)
    model = _Attend(4, mask, scale)
    model.initialize(0)
    model.to(dtype)
    g = Graph()
    x, y = g.input("x", (2, 3, T, 4), dtype), g.input("y", (2, 3, T, 4), dtype)
    loss = nn.mse_loss(model(x), y)
    program = nn.SGD(model.parameters(), lr=0.3).compile(loss, backend="cpu")
    feeds = {
        "x": rng.standard_normal((2, 3, T, 4)).astype(dtype),
        "y": rng.standard_normal((2, 3, T, 4)).astype(dtype),
    }
    losses = [float(program(feeds)[0]) for _ in range(5)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, model.w.value.copy(), source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scaled_masked_softmax_is_one_kernel_and_trains_as_the_numpy_path(dtype: str) -> None:
    mask = _causal(dtype)
    on = _train(True, dtype, mask)
    off = _train(False, dtype, mask)
    assert on[2].count("= _masked_softmax") == 1
    assert "_masked_softmax" not in off[2]
    # the kernel reads the scores product itself: the scale and the mask's lines go
    (call,) = [line for line in on[2].splitlines() if "_masked_softmax" in line]
    scores = call.split("(")[1].split(",")[0]
    assert f"{scores} = _matmul(" in on[2]
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(on[0], off[0], rtol=tol)
    np.testing.assert_allclose(on[1], off[1], rtol=tol, atol=tol)
    assert on[0][-1] < on[0][0]


@pytest.mark.parametrize(("shape", "scale"), [((1, 1, T, T), None), ((3, T, T), 0.25), ((T,), 2.0)])
def test_masks_ending_the_scores_shape_and_no_scale_fuse(
    shape: tuple[int, ...], scale: float | None
) -> None:
    rng = np.random.default_rng(3)
    mask = np.where(rng.random(shape) < 0.3, -1e9, rng.standard_normal(shape)).astype("float32")
    on = _train(True, "float32", mask, scale)
    off = _train(False, "float32", mask, scale)
    assert on[2].count("= _masked_softmax") == 1
    np.testing.assert_allclose(on[0], off[0], rtol=1e-5)
    np.testing.assert_allclose(on[1], off[1], rtol=1e-5, atol=1e-6)


def test_a_mask_broadcast_along_the_rows_keeps_its_lines() -> None:
    mask = np.zeros((T, 1), "float32")
    mask[-1] = -1e9
    on = _train(True, "float32", mask)
    assert "_masked_softmax" not in on[2]
    np.testing.assert_allclose(on[0], _train(False, "float32", mask)[0], rtol=1e-5)


def _reference(x: np.ndarray, scale: float, mask: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        t = x * x.dtype.type(scale) + mask
        e = np.exp(t - t.max(axis=-1, keepdims=True))
        out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masked_softmax_kernel_matches_numpy_with_non_finite_values(dtype: str) -> None:
    from asgrad.tensor.cpu.jit.kernels_attention import masked_softmax

    rng = np.random.default_rng(2)
    mask = _causal(dtype)
    mask[2] = -np.inf  # a row masked whole: NaN, as numpy
    x = rng.standard_normal((2, 4, T, T)).astype(dtype)
    x[0, 0, 1, 4] = np.nan  # under the mask: NaN + -inf is NaN
    x[0, 1, 3, 0] = np.inf  # inf - inf
    x[1, 2, 4, 5] = np.finfo(dtype).max  # overflows once scaled: inf + -inf
    x[1, 3, 5, 2] = -np.inf  # an entry of e**-inf = 0
    want = _reference(x, 3.0, mask)
    got = masked_softmax(x, 3.0, mask)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 0, 1]).all()
    assert np.isnan(got[:, :, 2]).all()
    tol = 2e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    inplace = x.copy()
    assert masked_softmax(inplace, 3.0, mask, out=inplace) is inplace
    np.testing.assert_array_equal(inplace, got)


def test_the_scale_of_the_scores_gradient_goes_into_the_softmax_gradient_kernel() -> None:
    mask = _causal("float64")
    scaled = _train(True, "float64", mask, 0.5)
    plain = _train(True, "float64", mask, None)
    lines = [sum(" = " in line for line in src.splitlines()) for src in (scaled[2], plain[2])]
    assert lines[0] == lines[1]  # neither the forward's scale nor the gradient's is a line
    assert scaled[2].count("= _softmax_backward") == 1
    off = _train(False, "float64", mask, 0.5)
    np.testing.assert_allclose(scaled[0], off[0], rtol=1e-12)
    np.testing.assert_allclose(scaled[1], off[1], rtol=1e-12, atol=1e-12)
