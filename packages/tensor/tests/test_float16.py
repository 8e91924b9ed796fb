"""float16 on the CPU: the numpy reference meaning of half precision.

Elementwise ops round to float16 after each op (as numpy does); sums, means,
matrix products and row programs (softmax, layer norm) accumulate in float32 and
round once. The compiled (Numba) path has no float16 arithmetic: it declines those
nodes and the numpy path runs them, with the same values.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from asgrad.tensor import DTypeError, Graph, evaluate
from asgrad.tensor.api.nn_functional import layer_norm
from asgrad.tensor.cpu import jit
from asgrad.tensor.ir.dtypes import FLOAT_DTYPES, as_dtype, is_float


@pytest.fixture(params=[False, True], ids=["numpy", "compiled"])
def cpu_path(request: pytest.FixtureRequest) -> Iterator[bool]:
    jit.set_enabled(request.param)
    yield request.param
    jit.set_enabled(None)


def _half(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def test_float16_is_a_differentiable_float_dtype() -> None:
    assert as_dtype(np.float16) == as_dtype("float16") == "float16"
    assert "float16" in FLOAT_DTYPES
    assert is_float("float16")
    g = Graph()
    x = g.input("x", (3,), "float16")
    assert x.dtype == "float16"
    assert x.cast("float32").dtype == "float32"
    assert g.input("y", (3,)).astype("float16").dtype == "float16"
    assert g.constant(np.ones(2, np.float16)).dtype == "float16"


def test_elementwise_ops_round_to_float16_after_each_op(cpu_path: bool) -> None:
    rng = np.random.default_rng(0)
    xv, yv = _half(rng, 64, 33), _half(rng, 64, 33)
    g = Graph()
    x, y = g.input("x", xv.shape, "float16"), g.input("y", yv.shape, "float16")
    outs = [x * y + 1.0, (x - y).exp(), x.tanh(), (x * 0.5).sigmoid(), x.abs().sqrt()]
    values = evaluate(outs, {"x": xv, "y": yv})
    with np.errstate(all="ignore"):
        refs = [xv * yv + np.float16(1.0), np.exp(xv - yv), np.tanh(xv)]
        refs += [np.float16(1) / (np.float16(1) + np.exp(-(xv * np.float16(0.5))))]
        refs += [np.sqrt(np.abs(xv))]
    for value, ref in zip(values, refs, strict=True):
        assert value.dtype == np.float16
        # two float16 steps: a stable form (sigmoid) rounds at other points than this one
        np.testing.assert_allclose(value.astype(np.float32), ref.astype(np.float32), rtol=2e-3)
    # the plain arithmetic is exactly numpy's float16 rounding
    np.testing.assert_array_equal(values[0], refs[0])


def test_sums_and_means_accumulate_in_float32(cpu_path: bool) -> None:
    xv = np.ones((4096, 3), np.float16)  # float16 steps of 1 stop at 2048
    g = Graph()
    x = g.input("x", xv.shape, "float16")
    total, mean, rows = evaluate([x.sum(axis=0), x.mean(axis=0), x.sum()], {"x": xv})
    assert total.dtype == mean.dtype == rows.dtype == np.float16
    np.testing.assert_array_equal(total, np.full(3, 4096, np.float16))
    np.testing.assert_array_equal(mean, np.ones(3, np.float16))
    assert float(rows) == 12288.0


def test_matmul_accumulates_in_float32_and_rounds_once(cpu_path: bool) -> None:
    rng = np.random.default_rng(1)
    av, bv = _half(rng, 2, 48, 512), _half(rng, 512, 40)
    g = Graph()
    a, b = g.input("a", av.shape, "float16"), g.input("b", bv.shape, "float16")
    (out,) = evaluate([a @ b], {"a": av, "b": bv})
    ref = np.matmul(av.astype(np.float32), bv.astype(np.float32)).astype(np.float16)
    assert out.dtype == np.float16
    # float32 BLAS orders its additions its own way: at most one float16 step apart
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=1e-3)


def test_softmax_and_layer_norm_rows_run_in_float32(cpu_path: bool) -> None:
    rng = np.random.default_rng(2)
    xv = _half(rng, 8, 300, scale=3.0)
    g = Graph()
    x = g.input("x", xv.shape, "float16")
    soft, logs, norm = evaluate(
        [x.softmax(axis=-1), x.log_softmax(axis=-1), layer_norm(x)], {"x": xv}
    )
    w = xv.astype(np.float32)
    e = np.exp(w - w.max(-1, keepdims=True))
    mu, var = w.mean(-1, keepdims=True), w.var(-1, keepdims=True)
    refs = [e / e.sum(-1, keepdims=True), np.log(e / e.sum(-1, keepdims=True))]
    refs += [(w - mu) / np.sqrt(var + 1e-5)]
    for value, ref in zip((soft, logs, norm), refs, strict=True):
        assert value.dtype == np.float16
        np.testing.assert_allclose(value.astype(np.float32), ref, rtol=2e-3, atol=1e-4)


def test_values_beyond_float16_become_infinite_and_nan_propagates(cpu_path: bool) -> None:
    g = Graph()
    x = g.input("x", (4,))
    half = x.cast("float16")
    feed = {"x": np.array([70000.0, -1e6, 300.0, np.nan], np.float32)}
    with np.errstate(over="ignore", invalid="ignore"):  # numpy warns, as for float32
        (cast, squared, summed) = evaluate([half, half * half, half.sum()], feed)
    assert cast.dtype == np.float16
    np.testing.assert_array_equal(cast, np.array([np.inf, -np.inf, 300.0, np.nan], np.float16))
    assert squared[2] == np.inf  # 90000 > 65504
    assert np.isnan(summed)


def test_float16_and_float32_operands_need_an_explicit_cast() -> None:
    g = Graph()
    a, b = g.input("a", (2,), "float16"), g.input("b", (2,))
    with pytest.raises(DTypeError, match="cast one with"):
        _ = a + b
    with pytest.raises(DTypeError, match="cast one with"):
        _ = a.reshape((1, 2)) @ b.reshape((2, 1))
    assert (a + b.cast("float16")).dtype == "float16"
