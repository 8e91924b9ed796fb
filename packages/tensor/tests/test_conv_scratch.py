"""The convolution kernels reuse scratch buffers; what they return must be their own."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor.ir.registry import get_op
from asgrad.tensor.ops.spatial import scratch


@pytest.mark.parametrize("n", [1, 2])
def test_results_survive_later_calls_and_own_their_memory(n: int) -> None:
    rng = np.random.default_rng(0)
    attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    x = rng.standard_normal((n, 1, 5, 4)).astype(np.float32)
    w = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    conv, back_in = get_op("conv2d").kernel, get_op("conv2d_backward_input").kernel
    back_w = get_op("conv2d_backward_weight").kernel
    y = conv(x, w, **attrs)
    dx = back_in(y, w, x, **attrs)
    dw = back_w(x, y, kernel_size=(3, 3), **attrs)
    t = get_op("conv_transpose2d").kernel(x, w, **attrs, output_padding=(0, 0))
    first = [a.copy() for a in (y, dx, dw, t)]
    for a in (y, dx, dw, t):
        assert a.dtype == np.float32
        assert a.flags.owndata or a.base is None or a.base.nbytes == a.nbytes
    # Other calls (other values, other shapes) reuse the scratch buffers.
    conv(-x, w, **attrs)
    back_in(-y, w, x, **attrs)
    conv(rng.standard_normal((3, 1, 6, 6)).astype(np.float32), w, **attrs)
    for got, want in zip((y, dx, dw, t), first, strict=True):
        np.testing.assert_array_equal(got, want)


def test_scratch_reuses_one_buffer_per_role() -> None:
    a = scratch("test-role", (4, 5), np.float32)
    b = scratch("test-role", (2, 3), np.float64)
    assert np.shares_memory(a, b)
    assert b.shape == (2, 3)
    assert b.dtype == np.float64
    assert b.flags.c_contiguous
    assert not np.shares_memory(a, scratch("other-role", (4, 5), np.float32))
