"""Row kernels fused with the elementwise chains around them (`asgrad.gpu.plan.fusion_rows`):
a chain feeding a row program or a trailing-axis reduction is computed as the row is
read (and stored for its other readers), an elementwise reader is the kernel's output
expression, a row program read by another one over the same rows is inlined into it.
Every value matches the numpy reference, NaN and infinities included, in fewer
dispatches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile
from asgrad.tensor.api.nn_functional import layer_norm

pytestmark = pytest.mark.gpu


def _both(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> tuple[Any, Any]:
    """The GPU's values and dispatch kinds, checked against the numpy reference."""
    gpu = compile(outs, backend="gpu")
    got = gpu(feeds)
    with np.errstate(all="ignore"):  # numpy warns where NaN and infinities flow
        want = compile(outs, backend="cpu")(feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, equal_nan=True)
    schedule = gpu.executable.schedule  # type: ignore[attr-defined]  # the GPU executable has one
    return got, count_kinds(build_plan(schedule, feeds, device).commands)


def _normal(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_layer_norm_reads_its_residual_sum_and_stores_it_for_later_readers(
    device: Device,
) -> None:
    B, T, D = 3, 5, 32
    feeds = {
        "x": _normal(B, T, D),
        "r": _normal(B, T, D, seed=1),
        "b": _normal(D, seed=2),
        "pos": _normal(T, D, seed=3),
        "w": _normal(D, seed=4),
        "wb": _normal(D, seed=5),
    }
    feeds["x"][0, 0, 3] = np.nan
    feeds["x"][1, 2, :2] = [np.inf, -np.inf]
    g = Graph()
    x, r, b, pos, w, wb = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    s = x + pos + (r + b)  # a position embedding over the batch, a bias along the row
    y = layer_norm(s, w, wb)
    later = s * 2.0 - 1.0  # reads the sum the norm kernel stored
    _, kinds = _both([y, later], feeds, device)
    assert kinds == {"norm": 1, "elementwise": 1}, kinds


def test_softmax_reads_its_scale_and_a_mask_broadcast_over_batch_and_heads(
    device: Device,
) -> None:
    B, H, T = 2, 3, 8
    mask = np.triu(np.full((T, T), -1e9, np.float32), 1)
    mask[3] = -np.inf  # a row masked whole: NaN, as numpy
    feeds = {"att": _normal(B, H, T, T), "scale": np.full((), 0.25, np.float32), "mask": mask}
    feeds["att"][1, 2, 5, 1] = np.nan
    g = Graph()
    att, scale, m = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    (got,), kinds = _both([(att * scale + m).softmax(-1)], feeds, device)
    assert np.isnan(got[:, :, 3]).all()
    assert kinds == {"softmax": 1}, kinds


def test_a_row_programs_elementwise_reader_is_its_output_expression(device: Device) -> None:
    feeds = {"x": _normal(6, 40), "g": _normal(6, 40, seed=1)}
    feeds["g"][2, 7] = np.inf
    g = Graph()
    x, grad = g.input("x", (6, 40), free=()), g.input("g", (6, 40), free=())
    _, kinds = _both([layer_norm(x) * grad], feeds, device)
    assert kinds == {"norm": 1}, kinds
    _, kinds = _both([(x.softmax(-1) * grad + 1.0).tanh()], feeds, device)
    assert kinds == {"softmax": 1}, kinds


def test_a_trailing_sum_takes_its_input_chain_and_its_broadcast_reader(device: Device) -> None:
    """softmax's gradient as graph ops, ``y * (g - sum(g * y))``: one row kernel."""
    feeds = {"y": _normal(4, 3, 50), "g": _normal(4, 3, 50, seed=1)}
    feeds["g"][0, 1, 4] = np.nan
    g = Graph()
    y, grad = g.input("y", (4, 3, 50), free=()), g.input("g", (4, 3, 50), free=())
    s = (grad * y).sum(axis=-1, keepdims=True)
    _, kinds = _both([y * (grad - s) * 0.5], feeds, device)
    assert kinds == {"reduction": 1}, kinds
    # a max without keepdims, expanded back by a reshape
    peak = (y * 2.0).max(axis=-1).reshape(4, 3, 1)
    _, kinds = _both([(y * 2.0 - peak).exp()], feeds, device)
    assert kinds == {"reduction": 1}, kinds


def test_a_row_program_read_by_a_reduction_of_its_rows_is_inlined_into_it(
    device: Device,
) -> None:
    """cross-entropy's picked log-probability: log_softmax, product and sum in one."""
    feeds = {"z": _normal(16, 10), "t": np.eye(10, dtype=np.float32)[np.arange(16) % 10]}
    feeds["z"][3, 2] = np.inf  # +inf logit: NaN in that row, as numpy
    g = Graph()
    z, t = g.input("z", (16, 10), free=()), g.input("t", (16, 10), free=())
    (got,), kinds = _both([(z.log_softmax(-1) * t).sum(axis=-1)], feeds, device)
    assert np.isnan(got[3])
    assert kinds == {"reduction": 1}, kinds


def test_an_elementwise_kernel_reading_a_row_program_runs_in_an_earlier_row_kernel(
    device: Device,
) -> None:
    """A layer norm's backward and its weight's gradient term (the normalised input
    times the output gradient) over the same rows: one kernel computes both."""
    feeds = {"g": _normal(4, 6, 24), "x": _normal(4, 6, 24, seed=1), "w": _normal(24, seed=2)}
    feeds["x"][1, 1, 1] = np.nan
    g = Graph()
    grad, x, w = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    attrs = {"normalized_shape": (24,), "eps": 1e-5}
    dx = g.apply("layer_norm_backward", [grad, x, w], attrs)
    term = g.apply("layer_norm", [x], attrs) * grad
    (_, got_term), kinds = _both([dx + 1.0, term], feeds, device)
    assert np.isnan(got_term[1, 1]).all()
    assert kinds == {"norm": 1}, kinds


def test_a_reduction_stores_its_reader_of_its_own_shape(device: Device) -> None:
    """``sum(x * w) / count``: the product read as the row is, the division as each
    row's sum is written."""
    feeds = {"x": _normal(12, 30), "w": _normal(12, 30, seed=1), "n": _normal(12, seed=2)}
    feeds["n"][4] = 0.0  # a division by zero: infinity or NaN, as numpy
    g = Graph()
    x, w, n = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    _, kinds = _both([(x * w).sum(axis=-1) / n + 1.0], feeds, device)
    assert kinds == {"reduction": 1}, kinds
