"""Integer math on the GPU as on the CPU: floor division, remainder, powers
and shifts give the CPU's values, and the values with no integer result (a zero
divisor, a negative power) raise the CPU's error, never a different number."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.errors import GpuIntegerOverflowError
from asgrad.tensor import Graph, Tensor, evaluate
from asgrad.tensor.errors import IntegerArithmeticError

pytestmark = pytest.mark.gpu

DTYPES = ["int32", "int64"]
MIN32 = -(2**31)


def _run(fn: Callable[..., Tensor], backend: str, *arrays: np.ndarray) -> np.ndarray:
    g = Graph("math-ints")
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    return evaluate([fn(*xs)], {f"x{i}": a for i, a in enumerate(arrays)}, backend=backend)[0]


def _both(fn: Callable[..., Tensor], *arrays: np.ndarray) -> None:
    with np.errstate(over="ignore"):  # int32 wraps on both
        cpu = _run(fn, "cpu", *arrays)
    np.testing.assert_array_equal(_run(fn, "gpu", *arrays), cpu)


@pytest.mark.parametrize("dtype", DTYPES)
def test_division_and_remainder_of_every_sign_pair(device: Device, dtype: str) -> None:
    a, b = (v.ravel().astype(dtype) for v in np.meshgrid(np.arange(-9, 10), [-4, -3, -1, 1, 2, 5]))
    _both(lambda x, y: x // y, a, b)
    _both(lambda x, y: x % y, a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_a_zero_divisor_raises_on_both_backends(device: Device, dtype: str, op: str) -> None:
    a, b = np.array([5, 6, 7], dtype), np.array([1, 0, 2], dtype)
    fn = {"floor_divide": lambda x, y: x // y, "remainder": lambda x, y: x % y}[op]
    for backend in ("cpu", "gpu"):
        with pytest.raises(IntegerArithmeticError, match=op):
            _run(fn, backend, a, b)
    _both(fn, a, np.array([1, 3, 2], dtype))  # the device works on afterwards


@pytest.mark.parametrize("dtype", DTYPES)
def test_integer_powers(device: Device, dtype: str) -> None:
    a = np.array([2, -3, 0, 0, 1, -1, 7, -2, 3], dtype)
    b = np.array([10, 3, 0, 5, 99, 7, 2, 30, 19], dtype)
    _both(lambda x, y: x**y, a, b)
    for backend in ("cpu", "gpu"):
        with pytest.raises(IntegerArithmeticError, match="negative"):
            _run(lambda x, y: x**y, backend, a, np.where(b == 3, -1, b).astype(dtype))


def test_int32_powers_wrap_and_int64_ones_beyond_int32_raise(device: Device) -> None:
    a, b = np.array([3, 2, -2]), np.array([21, 40, 31])
    _both(lambda x, y: x**y, a.astype("int32"), b.astype("int32"))
    np.testing.assert_array_equal(_run(lambda x, y: x**y, "gpu", a[2:], b[2:]), [MIN32])
    with pytest.raises(GpuIntegerOverflowError, match="pow"):
        _run(lambda x, y: x**y, "gpu", a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_shifts_within_and_beyond_the_width(device: Device, dtype: str) -> None:
    a = np.array([1, -1, 5, -7, 0, 3, -3, 12345], dtype)
    s = np.array([0, 3, 10, 1, 40, -1, 99, 31 if dtype == "int32" else 2], dtype)
    _both(lambda x, y: x << y, a, s)
    _both(lambda x, y: x >> y, a, s)


def test_int64_left_shift_beyond_int32_raises(device: Device) -> None:
    with pytest.raises(GpuIntegerOverflowError, match="left_shift"):
        _run(lambda x, y: x << y, "gpu", np.array([1, 3]), np.array([31, 40]))
    np.testing.assert_array_equal(_run(lambda x: x << 31, "gpu", np.array([-1])), [MIN32])


def test_int64_floor_division_of_the_int32_minimum_by_minus_1_raises(device: Device) -> None:
    with pytest.raises(GpuIntegerOverflowError, match="floor_divide"):
        _run(lambda x, y: x // y, "gpu", np.array([MIN32]), np.array([-1]))


@pytest.mark.parametrize("dtype", [*DTYPES, "bool"])
def test_bitwise_ops_and_bool_reductions(device: Device, dtype: str) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-50, 50, (4, 6)).astype(dtype) for _ in range(2))
    for fn in (lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y):
        _both(fn, a, b)
    _both(lambda x: ~x, a)
    _both(lambda x, y: x.maximum(y), a, b)
    _both(lambda x: x.max(axis=1), a)
    _both(lambda x: x.min(axis=0), a)
    _both(lambda x: x.any(axis=1), a)
    _both(lambda x: x.all(axis=0), a)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape", [(3, 2000), (700, 5, 2)], ids=["long rows", "axis 0"])
def test_sorts_of_model_sized_lines_match_the_cpu(
    device: Device, descending: bool, shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-50, 50, shape).astype(np.float32)  # many ties: stability shows
    x.flat[::97] = np.nan
    axis = 1 if shape[0] == 3 else 0
    _both(lambda t: t.argsort(axis, descending=descending), x)
    _both(lambda t: t.sort(axis, descending=descending)[0], x)
    _both(lambda t: t.topk(5, axis, largest=not descending)[1], x)


def test_a_line_beyond_the_gpu_sort_limit_is_a_typed_error(device: Device) -> None:
    from asgrad.gpu import GpuUnsupportedError
    from asgrad.gpu.lowering._scan import MAX_SORT

    x = np.zeros((1, MAX_SORT + 1), np.float32)
    with pytest.raises(GpuUnsupportedError, match=f"at most {MAX_SORT} elements"):
        _run(lambda t: t.argsort(), "gpu", x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_integer_scans(device: Device, dtype: str) -> None:
    x = np.random.default_rng(2).integers(-1000, 1000, (5, 300)).astype(dtype)
    _both(lambda t: t.cumsum(1), x)
    _both(lambda t: t.cumsum(0, reverse=True), x)
    _both(lambda t: t.cummax(1)[1], x)
    _both(lambda t: t.cummin(0)[0], x)
    with pytest.raises(GpuIntegerOverflowError, match="cumsum"):
        _run(lambda t: t.cumsum(), "gpu", np.array([2**30, 2**30, 5], dtype))
