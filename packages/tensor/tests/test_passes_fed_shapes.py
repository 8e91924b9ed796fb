"""The graph passes stay valid for every shape a graph accepts, not only the declared one."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import FeedError, Graph, evaluate
from asgrad.tensor.ir.passes import optimize


def test_a_reshape_that_is_a_no_op_at_the_declared_shape_is_kept() -> None:
    g = Graph()
    x = g.input("x", (3, 3))
    y = x.reshape(3, -1).sum(axis=1)
    (nodes, _) = optimize([y.node])
    assert "reshape" in [n.op for n in nodes]
    fed = np.arange(18, dtype=np.float32).reshape(6, 3)
    (got,) = evaluate([y], {"x": fed})
    np.testing.assert_array_equal(got, fed.reshape(3, -1).sum(axis=1))


@pytest.mark.parametrize("batch", [3, 6])
def test_a_broadcast_to_the_declared_shape_still_checks_the_fed_one(batch: int) -> None:
    g = Graph()
    x = g.input("x", (3, 1))
    y = x.broadcast_to((3, 1)) * 2.0
    fed = np.ones((batch, 1), np.float32)
    if batch == 3:
        np.testing.assert_array_equal(evaluate([y], {"x": fed})[0], fed * 2.0)
    else:  # (6, 1) cannot broadcast to (3, 1): an error, not a silent result
        with pytest.raises(FeedError, match=r"broadcast_to .* do not broadcast"):
            evaluate([y], {"x": fed})


def test_a_cast_to_the_same_dtype_is_still_dropped() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    (nodes, _) = optimize([x.cast("float32").node])
    assert [n.op for n in nodes] == ["input"]
