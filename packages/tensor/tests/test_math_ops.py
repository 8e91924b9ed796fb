"""The math ops (rounding, tests, logic, integers, scans) through their front doors:
operators, methods, functions, argument checks and the edge cases the registry's
generated tests do not reach."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import asgrad.tensor as at
from asgrad.tensor import (
    ArgumentError,
    DTypeError,
    Graph,
    Tensor,
    evaluate,
)
from asgrad.tensor.api import functional_math, functional_reduce
from asgrad.tensor.errors import IntegerArithmeticError


def _run(build: Any, *arrays: np.ndarray) -> np.ndarray:
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    out = build(*xs)
    return evaluate([out], {f"x{i}": a for i, a in enumerate(arrays)})[0]


INTS = np.array([7, -7, 0, 5, -1, 13])
DIVISORS = np.array([2, 2, -3, -3, 4, -5])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_floor_division_and_remainder_follow_python(dtype: str) -> None:
    a, b = INTS.astype(dtype), DIVISORS.astype(dtype)
    q = _run(lambda x, y: x // y, a, b)
    r = _run(lambda x, y: x % y, a, b)
    assert q.dtype == r.dtype == np.dtype(dtype)
    assert q.tolist() == [int(x) // int(y) for x, y in zip(a, b, strict=True)]
    assert r.tolist() == [int(x) % int(y) for x, y in zip(a, b, strict=True)]
    assert (q * b + r == a).all()


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_is_an_error(op: str) -> None:
    fn = getattr(functional_math, op)
    with pytest.raises(IntegerArithmeticError, match=f"{op}: integer division by zero"):
        _run(lambda x, y: fn(x, y), INTS, np.array([1, 2, 0, 1, 1, 1]))


def test_integer_pow_and_its_negative_power_error() -> None:
    got = _run(lambda x, y: x**y, np.array([2, -3, 0, 5]), np.array([10, 3, 0, 1]))
    assert got.tolist() == [1024, -27, 1, 5]
    with pytest.raises(IntegerArithmeticError, match="negative power"):
        _run(lambda x, y: x**y, np.array([2]), np.array([-1]))


def test_floats_are_not_floor_divided() -> None:
    x = Graph().input("x", (2,))
    with pytest.raises(DTypeError, match="operands must be integer"):
        x // 2.0


def test_bool_operators_are_logical_and_int_operators_bitwise() -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    got = [_run(f, a, b).tolist() for f in (lambda x, y: x & y, lambda x, y: x | y)]
    assert got == [[True, False, False, False], [True, True, True, False]]
    assert _run(lambda x, y: x ^ y, a, b).tolist() == [False, True, True, False]
    assert _run(lambda x: ~x, a).tolist() == [False, False, True, True]
    i = np.array([12, -1, 5])
    assert _run(lambda x: (x & 6, x | 1, x ^ 3, ~x, x << 2, x >> 1)[5], i).tolist() == [6, -1, 2]
    assert _run(lambda x: 6 & x, i).tolist() == [4, 6, 4]
    assert _run(lambda x: ~x, i).tolist() == [-13, 0, -6]
    assert _run(lambda x: 1 << x, np.array([0, 3, 62])).tolist() == [1, 8, 2**62]


def test_bitwise_ops_reject_floats_and_logical_ops_take_anything() -> None:
    g = Graph()
    x = g.input("x", (3,))
    with pytest.raises(DTypeError, match="integer or bool"):
        x & x
    got = _run(lambda v: at.logical_and(v, v > 1.0), np.array([0.0, 1.0, 2.0]))
    assert got.tolist() == [False, False, True]
    assert _run(lambda v: v.logical_not(), np.array([0.0, -2.0])).tolist() == [True, False]


def test_maximum_minimum_max_min_on_bools_and_ints() -> None:
    a, b = np.array([True, False, False]), np.array([False, False, True])
    assert _run(at.maximum, a, b).tolist() == [True, False, True]
    assert _run(at.minimum, a, b).tolist() == [False, False, False]
    m = np.array([[True, False], [False, False]])
    assert _run(lambda x: x.max(axis=1), m).tolist() == [True, False]
    assert _run(lambda x: x.min(axis=0), m).tolist() == [False, False]
    assert _run(lambda x: x.amax(), np.array([3, -9, 4], np.int32)).tolist() == 4


def test_round_is_half_to_even_with_decimals() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1.25, 1234.5])
    assert _run(lambda t: t.round(), x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 1.0, 1234.0]
    assert _run(lambda t: t.round(1), x)[5] == 1.2
    assert _run(lambda t: t.round(-2), x)[6] == 1200.0
    with pytest.raises(Exception, match="decimals must be an integer"):
        Graph().input("x", (2,)).round(1.5)  # type: ignore[arg-type]  # on purpose


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_to_num_defaults_to_the_dtypes_largest_values(dtype: str) -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.5], dtype)
    got = _run(lambda t: t.nan_to_num(), x)
    big = np.finfo(dtype).max
    assert got.tolist() == [0.0, big, -big, 1.5]
    np.testing.assert_array_equal(got, np.nan_to_num(x))


def test_isclose_matches_numpy_on_specials() -> None:
    a = np.array([1.0, np.inf, np.inf, np.nan, 1e-9, 1.0, -np.inf])
    b = np.array([1.0 + 1e-6, np.inf, -np.inf, np.nan, 0.0, 1.1, 1.0])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}):
        got = _run(lambda x, y, kw=kw: at.isclose(x, y, **kw), a, b)
        np.testing.assert_array_equal(got, np.isclose(a, b, **kw))
    with pytest.raises(ArgumentError, match="rtol and atol must be >= 0"):
        Graph().input("x", (2,)).isclose(1.0, rtol=-1.0)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log 0 of the -inf row
def test_logsumexp_of_an_all_minus_inf_row_is_minus_inf() -> None:
    x = np.array([[-np.inf, -np.inf], [1000.0, 1000.0], [-np.inf, 0.0]])
    got = _run(lambda t: t.logsumexp(axis=1), x)
    np.testing.assert_allclose(got, [-np.inf, 1000.0 + np.log(2.0), 0.0])


def test_var_and_std_take_correction_or_ddof() -> None:
    x = np.array([[1.0, 2.0, 4.0, 7.0], [0.0, 0.0, 1.0, 1.0]])
    for c in (0, 1, 2):
        got = _run(lambda t, c=c: t.var(axis=1, correction=c), x)
        np.testing.assert_allclose(got, np.var(x, axis=1, ddof=c))
        got = _run(lambda t, c=c: at.std(t, 1, ddof=c), x)
        np.testing.assert_allclose(got, np.std(x, axis=1, ddof=c))
    t = Graph().input("x", (3,))
    with pytest.raises(ArgumentError, match="not both"):
        t.var(correction=1, ddof=0)
    with pytest.raises(ArgumentError, match="correction must be a number >= 0"):
        t.std(correction=-1)
    assert "correction" not in t.var().node.attrs  # the default builds the graph it did


def test_any_and_all_over_empty_and_float_axes() -> None:
    empty = np.zeros((2, 0))
    assert _run(lambda t: t.any(axis=1), empty).tolist() == [False, False]
    assert _run(lambda t: t.all(axis=1), empty).tolist() == [True, True]
    x = np.array([[0.0, -0.0], [0.0, np.nan]])
    assert _run(lambda t: t.any(axis=1), x).tolist() == [False, True]


def test_argmin_takes_the_first_of_ties_and_a_nan() -> None:
    x = np.array([[3.0, 1.0, 1.0], [2.0, np.nan, np.nan]])
    assert _run(lambda t: at.argmin(t, axis=1), x).tolist() == [1, 1]


def test_every_function_is_the_method() -> None:
    x = Graph().input("x", (2, 3))
    for name in ("floor", "ceil", "trunc", "frac", "isnan", "isinf", "isfinite", "prod"):
        module = functional_reduce if name == "prod" else functional_math
        assert getattr(module, name)(x).op == getattr(x, name)().op
    assert isinstance(functional_math.round(x), Tensor)


def test_scans_along_any_axis_and_reversed() -> None:
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 10
    for axis in (0, 1, 2, -1):
        np.testing.assert_array_equal(_run(lambda t, a=axis: t.cumsum(a), x), np.cumsum(x, axis))
        got = _run(lambda t, a=axis: t.cumsum(a, reverse=True), x)
        np.testing.assert_array_equal(got, np.flip(np.cumsum(np.flip(x, axis), axis), axis))
    assert _run(lambda t: t.cumsum(), np.array([1, 2], np.int32)).dtype == np.int64


def test_cummax_returns_values_and_pytorch_indices() -> None:
    x = np.array([1.0, 3.0, 3.0, 2.0, np.nan, 5.0])
    g = Graph()
    t = g.input("x", x.shape, "float64")
    values, indices = t.cummax()
    low, low_at = t.cummin()
    got = evaluate([values, indices, low, low_at], {"x": x})
    np.testing.assert_array_equal(got[0], [1, 3, 3, 3, np.nan, np.nan])
    assert got[1].tolist() == [0, 1, 2, 2, 4, 4]
    assert got[3].tolist() == [0, 0, 0, 0, 4, 4]


def test_sort_argsort_and_topk() -> None:
    x = np.array([[3.0, 1.0, np.nan, 1.0, 2.0], [0.0, -1.0, 5.0, 5.0, 4.0]])
    g = Graph()
    t = g.input("x", x.shape, "float64")
    values, order = t.sort()
    _, down_order = t.sort(descending=True)
    top, top_at = t.topk(2)
    _, low_at = t.topk(2, largest=False)
    got = evaluate([values, order, down_order, top, top_at, low_at, t.argsort(0)], {"x": x})
    assert got[1].tolist() == [[1, 3, 4, 0, 2], [1, 0, 4, 2, 3]]
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, got[1], 1))
    assert got[2].tolist() == [[2, 0, 4, 1, 3], [2, 3, 4, 0, 1]]
    np.testing.assert_array_equal(got[3], [[np.nan, 3.0], [5.0, 5.0]])
    assert got[4].tolist() == [[2, 0], [2, 3]]
    assert got[5].tolist() == [[1, 3], [1, 0]]
    assert got[6].tolist() == [[1, 1, 1, 0, 0], [0, 0, 0, 1, 1]]
    with pytest.raises(ArgumentError, match="k = 6 is not in"):
        t.topk(6)
    assert t.topk(0)[0].shape == (2, 0)


def test_scans_and_sorts_reject_bools_and_float_only_scans_ints() -> None:
    g = Graph()
    b, i = g.input("b", (3,), "bool"), g.input("i", (3,), "int64")
    with pytest.raises(DTypeError, match="cannot scan or sort bool"):
        b.sort()
    with pytest.raises(DTypeError, match="float32 or float64"):
        i.cumprod()


@pytest.mark.parametrize(
    ("dtype", "value"),
    [("int64", 1.5), ("int64", float("nan")), ("int32", 2**40), ("bool", 2), ("int64", np.inf)],
)
def test_a_python_number_that_a_tensor_cannot_hold_is_an_error(dtype: str, value: object) -> None:
    # It used to be cast silently (int tensor + 1.5 added 1); asgrad does not promote.
    x = Graph().input("x", (2,), dtype)
    with pytest.raises(DTypeError, match=r"cannot join a .* tensor unchanged"):
        x + value if dtype != "bool" else x & value


def test_python_numbers_a_tensor_holds_exactly_still_join_it() -> None:
    g = Graph()
    i, b = g.input("i", (2,), "int64"), g.input("b", (2,), "bool")
    assert (i + 2.0).dtype == "int64"
    assert (b & 1).dtype == "bool"
    assert _run(lambda t: t * 3.0, np.array([1, -2])).tolist() == [3, -6]
