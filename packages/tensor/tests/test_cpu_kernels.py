"""The executor's float32 fast paths against the registered kernels, on the ops' cases."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.tensor import Graph, compile, cpu_kernels, get_op
from asgrad.tensor.executor import CPUExecutable

FAST: dict[str, Callable[..., np.ndarray]] = {
    "erf": cpu_kernels.erf_f32,
    "gelu": cpu_kernels.gelu_f32,
}


def _inputs(name: str) -> list[tuple[np.ndarray, dict[str, object]]]:
    op = get_op(name)
    assert op.cases is not None
    out = [(c.inputs[0], dict(c.attrs)) for c in op.cases(np.random.default_rng(0))]
    rng = np.random.default_rng(1)
    out.append((rng.standard_normal((16, 64, 33)) * 4.0, {}))
    out.append((np.array([-40.0, -3.0, -1e-30, 0.0, 1e-30, 2.5, 40.0]), {}))
    if name == "erf":  # GELU is 0 * inf there, in its kernel too
        out.append((np.array([-np.inf, np.inf]), {}))
    return out


@pytest.mark.parametrize("name", sorted(FAST))
def test_fast_path_matches_the_kernel_within_the_op_tolerance(name: str) -> None:
    op = get_op(name)
    rtol, atol = op.tolerance
    for x, attrs in _inputs(name):
        if x.ndim == 0 or attrs.get("approximate", "none") != "none":
            continue
        x32 = x.astype(np.float32)
        expected = op.kernel(x.astype(np.float64), **attrs)
        got = FAST[name](x32)
        assert got.dtype == np.float32
        assert got.shape == x.shape
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def test_nan_propagates() -> None:
    x = np.array([np.nan, 1.0], np.float32)
    assert np.isnan(cpu_kernels.erf_f32(x)[0])
    assert np.isnan(cpu_kernels.gelu_f32(x)[0])


def test_programs_use_the_fast_path_for_float32_only() -> None:
    g = Graph()
    x32, x64 = g.input("a", (4, 5)), g.input("b", (4, 5), "float64")
    program = compile([x32.gelu(), x32.erf(), x64.gelu(), x32.gelu("tanh")])
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5))
    ga, ea, gb, ta = program({"a": a, "b": b})
    np.testing.assert_allclose(ga, get_op("gelu").kernel(a.astype(np.float64)), atol=2e-6)
    np.testing.assert_allclose(ea, get_op("erf").kernel(a.astype(np.float64)), atol=2e-6)
    np.testing.assert_array_equal(gb, get_op("gelu").kernel(b))  # float64: the kernel itself
    np.testing.assert_array_equal(ta, get_op("gelu").kernel(a, approximate="tanh"))
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    assert fn.source.count("_gelu_f32(") == 1
    assert fn.source.count("_erf_f32(") == 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_where_zero_is_bit_exact(dtype: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(dtype)
    x[0, :4] = [np.nan, -np.inf, np.inf, -0.0]
    cond = rng.random((5, 7)) > 0.5
    cond[0, :4] = True
    zero = np.zeros((), dtype)
    for keep, expected in ((True, np.where(cond, x, zero)), (False, np.where(cond, zero, x))):
        got = cpu_kernels.where_zero(cond, x, keep)
        assert got.dtype == x.dtype
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))
    strided = x[:, ::2]
    got = cpu_kernels.where_zero(cond[:, ::2], strided)
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
