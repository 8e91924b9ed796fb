"""Integers on the GPU: exact in int32, and int64 results that do not fit raise.

GPU buffers hold int32 (int64 values too). Sums accumulate exactly in 64 bits, max/min
and argmax compare int32 (nothing goes through float32, whose 24-bit mantissa rounds
2**24 + 1). int32 elementwise arithmetic wraps, as numpy's does on the CPU; an int64
result (and any integer sum, which the CPU returns exactly as int64) that leaves the
int32 range raises :class:`GpuIntegerOverflowError` at the readback.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.errors import GpuIntegerOverflowError
from asgrad.tensor import Graph, Tensor, evaluate

pytestmark = pytest.mark.gpu

DTYPES = ["int32", "int64"]
BIG = 2**31 - 1


def _both(
    fn: Callable[..., Tensor], dtype: str, *arrays: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    g = Graph("ints")
    xs = [g.input(f"x{i}", a.shape, dtype) for i, a in enumerate(arrays)]
    feeds = {f"x{i}": a.astype(dtype) for i, a in enumerate(arrays)}
    out = fn(*xs)
    return evaluate([out], feeds, backend="gpu")[0], evaluate([out], feeds, backend="cpu")[0]


def _gpu(fn: Callable[..., Tensor], dtype: str, *arrays: np.ndarray) -> np.ndarray:
    g = Graph("ints")
    xs = [g.input(f"x{i}", a.shape, dtype) for i, a in enumerate(arrays)]
    feeds = {f"x{i}": a.astype(dtype) for i, a in enumerate(arrays)}
    return evaluate([fn(*xs)], feeds, backend="gpu")[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_int_sum_past_float32s_exact_range_is_exact(device: Device, dtype: str) -> None:
    gpu, cpu = _both(lambda x: x.sum(), dtype, np.array([2**24 + 1, 0]))
    assert int(gpu) == int(cpu) == 16777217


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "axis"),
    [((3, 70), 1), ((3, 20000), 1), ((20000, 3), 0), ((600, 40), 0), ((4, 5, 6), (0, 2))],
    ids=["rows", "long rows (split)", "long columns (split)", "columns", "two axes"],
)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_integer_reductions_are_exact(
    device: Device, dtype: str, shape: tuple[int, ...], axis: int | tuple[int, ...], kind: str
) -> None:
    rng = np.random.default_rng(0)
    # values near 2**24 (float32 cannot tell them apart) whose sums stay within int32
    bound = 2**31 // (2 * int(np.prod(shape)))
    x = rng.integers(2**24, 2**24 + 8, shape) * rng.choice([-1, 1], shape)
    if kind == "sum":
        x = rng.integers(-bound, bound, shape) + (x % 3)
    gpu, cpu = _both(lambda t: getattr(t, kind)(axis=axis), dtype, x)
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, 20000])
def test_a_sum_may_pass_the_int32_range_on_its_way(device: Device, dtype: str, n: int) -> None:
    # partial sums beyond 2**31 - 1, a total within: exact, as on the CPU
    x = np.zeros((2, n), np.int64)
    x[:, 0], x[:, 1], x[:, -1] = BIG, BIG, -BIG
    gpu, cpu = _both(lambda t: t.sum(axis=1), dtype, x)
    np.testing.assert_array_equal(gpu, cpu)
    np.testing.assert_array_equal(gpu, [BIG, BIG])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [2, 20000])
def test_a_sum_beyond_int32_raises(device: Device, dtype: str, n: int) -> None:
    x = np.zeros((3, n), np.int64)
    x[1, :2] = [BIG, 1]  # 2**31: the CPU returns it exactly, as int64
    with pytest.raises(GpuIntegerOverflowError, match=r"sum \(made at .*test_numerics_ints"):
        _gpu(lambda t: t.sum(axis=1), dtype, x)
    # the fault is cleared: the next run with values that fit returns them
    half = x // 2
    np.testing.assert_array_equal(_gpu(lambda t: t.sum(axis=1), dtype, half), half.sum(axis=1))


def test_int32_arithmetic_wraps_as_on_the_cpu(device: Device) -> None:
    a = np.array([BIG, -BIG - 1, 2**16, 7, -(2**31)])
    b = np.array([1, -1, 2**16, -3, 1])
    for fn in (
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: -x,
        lambda x, y: abs(x),
        lambda x, y: x.maximum(y),
        lambda x, y: x.clamp(-5, 2**40),
    ):
        gpu, cpu = _both(fn, "int32", a, b)
        np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize(
    ("name", "fn", "a", "b"),
    [
        ("add", lambda x, y: x + y, [BIG, 1], [1, 2]),
        ("add", lambda x, y: x + y, [-BIG - 1, 1], [-1, 2]),
        ("sub", lambda x, y: x - y, [-BIG - 1, 1], [1, 2]),
        ("mul", lambda x, y: x * y, [2**16, 1], [2**15, 2]),
        ("mul", lambda x, y: x * y, [-1, 1], [-BIG - 1, 2]),
        ("mul", lambda x, y: x * y, [-BIG - 1, 1], [-1, 2]),
        ("neg", lambda x, y: -x, [-BIG - 1, 1], [0, 0]),
        ("abs", lambda x, y: abs(x), [-BIG - 1, 1], [0, 0]),
    ],
)
def test_int64_results_beyond_int32_raise(
    device: Device, name: str, fn: Callable[..., Tensor], a: list[int], b: list[int]
) -> None:
    gpu_in = (np.array(a), np.array(b))
    with pytest.raises(GpuIntegerOverflowError, match=f"^{name} "):
        _gpu(fn, "int64", *gpu_in)
    # within the range: the CPU's values (products at the edge included)
    fits = (np.array([a[1], 2**15, -(2**15)]), np.array([b[1], -(2**16), 2**16]))
    gpu, cpu = _both(fn, "int64", *fits)
    np.testing.assert_array_equal(gpu, cpu)


def test_casts_of_floats_to_int64_beyond_int32_raise(device: Device) -> None:
    g = Graph("cast")
    x = g.input("x", (3,))
    fits = np.array([-(2.0**31), 2.0**31 - 128, -3.7], np.float32)
    got = evaluate([x.cast("int64")], {"x": fits}, backend="gpu")[0]
    np.testing.assert_array_equal(got, fits.astype(np.int64))
    for bad in (2.0**31, np.inf, np.nan, -1e10):
        feed = np.array([1.0, bad, 2.0], np.float32)
        with pytest.raises(GpuIntegerOverflowError, match="cast"):
            evaluate([x.cast("int64")], {"x": feed}, backend="gpu")


@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_of_integers_is_exact(device: Device, dtype: str) -> None:
    x = np.array([[2**24, 2**24 + 1, 2**24 - 1], [-(2**31), BIG, BIG]])
    gpu, cpu = _both(lambda t: t.argmax(axis=1), dtype, x)
    np.testing.assert_array_equal(gpu, cpu)
