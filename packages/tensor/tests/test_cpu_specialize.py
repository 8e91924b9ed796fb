"""The CPU backend's numpy specialisations at exact shapes (``asgrad.tensor.cpu.specialize``)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu import CPUExecutable
from asgrad.tensor.cpu.specialize import where_zero


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_where_zero_is_bit_exact(dtype: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(dtype)
    x[0, :4] = [np.nan, -np.inf, np.inf, -0.0]
    cond = rng.random((5, 7)) > 0.5
    cond[0, :4] = True
    zero = np.zeros((), dtype)
    for keep, expected in ((True, np.where(cond, x, zero)), (False, np.where(cond, zero, x))):
        got = where_zero(cond, x, keep)
        assert got.dtype == x.dtype
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))
    strided = x[:, ::2]
    got = where_zero(cond[:, ::2], strided)
    assert np.array_equal(got, np.where(cond[:, ::2], strided, zero), equal_nan=True)


def test_relu_gradient_uses_where_zero_and_keeps_kernel_values() -> None:
    g = Graph()
    x = g.input("x", (4, 6))
    y = g.input("y", (4, 6))
    relu_grad = g.apply("where", (x > 0.0, y, g.constant(0.0)))
    keep_neg = g.apply("where", (x > 0.0, g.constant(0.0), y))
    minus_zero = g.apply("where", (x > 0.0, y, g.constant(-0.0)))
    program = compile([relu_grad, keep_neg, minus_zero])
    rng = np.random.default_rng(4)
    a, b = (
        rng.standard_normal((4, 6)).astype(np.float32),
        rng.standard_normal((4, 6)).astype(np.float32),
    )
    out = program({"x": a, "y": b})
    zero = np.float32(0.0)
    np.testing.assert_array_equal(out[0], np.where(a > 0, b, zero))
    np.testing.assert_array_equal(out[1], np.where(a > 0, zero, b))
    assert np.array_equal(np.signbit(out[2]), np.signbit(np.where(a > 0, b, np.float32(-0.0))))
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    assert fn.source.count("_where_zero(") == 2  # not for the -0.0 branch
