"""A feed's buffer is never one that another value of the plan reuses: feeds are uploaded
before the plan's kernels replay, so a feed sharing a buffer with an intermediate, or
with another feed whose last use came before it was bound, would be overwritten."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, compile


@pytest.mark.gpu
def test_a_feed_read_for_its_shape_only_keeps_its_buffer_to_itself(device: Device) -> None:
    g = Graph()
    x = g.input("x", (3, 7, 4), free=())
    h0 = g.input("h0", (1, 7, 6), free=())
    # x is read for its shape only and dies at once; h0 is bound after it
    zeros = g.apply("broadcast_like", (g.constant(0, "float32"), x[0][..., :1]), {})
    out = zeros + h0[0]
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((3, 7, 4)).astype(np.float32),
        "h0": rng.standard_normal((1, 7, 6)).astype(np.float32),
    }
    prog = compile([out], backend="gpu")
    for _ in range(2):
        np.testing.assert_array_equal(prog(feeds)[0], feeds["h0"][0])
