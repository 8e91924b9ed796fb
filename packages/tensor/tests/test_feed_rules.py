"""What a feed may be: which axes may change size, and which dtype conversions are made.

A feed whose shape differs from the declared one on an axis
that is not free, or whose conversion to the input's dtype would change a value, is a
``FeedError``; rounding a float64 array to float32 warns once per program and input.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from asgrad.tensor import Graph, compile, evaluate
from asgrad.tensor.errors import FeedError, PrecisionWarning, ShapeError


def _sum_program(shape: tuple[int, ...], dtype: str = "float32", **kwargs: object) -> object:
    g = Graph()
    x = g.input("x", shape, dtype, **kwargs)  # type: ignore[arg-type]
    return compile([x.cast("float64").sum()])


# -- which axes are free ------------------------------------------------------------


def test_a_fixed_axis_fed_another_size_is_an_error() -> None:
    program = _sum_program((8, 3))
    with pytest.raises(FeedError) as info:
        program(x=np.ones((8, 5), np.float32))  # type: ignore[operator]
    message = str(info.value)
    assert "'x'" in message
    assert "float32[8, 3]" in message
    assert "[8, 5]" in message
    assert "free=" in message


def test_a_huge_declared_shape_does_not_accept_a_small_feed() -> None:
    program = _sum_program((2**20, 2**20))
    with pytest.raises(FeedError, match=r"float32\[1048576, 1048576\].*\[1, 1\]"):
        program(x=np.ones((1, 1), np.float32))  # type: ignore[operator]
    with pytest.raises(ShapeError, match="int64"):
        Graph().input("x", (2**40, 2**40))


def test_the_leading_axis_is_free_by_default() -> None:
    program = _sum_program((8, 3))
    for batch in (1, 5, 8, 64):
        (total,) = program(x=np.ones((batch, 3), np.float32))  # type: ignore[operator]
        assert total == batch * 3


def test_declared_free_axes_may_change_and_the_others_may_not() -> None:
    program = _sum_program((2, 3, 4), free=(0, -1))
    (total,) = program(x=np.ones((5, 3, 7), np.float32))  # type: ignore[operator]
    assert total == 105
    with pytest.raises(FeedError, match=r"axes \[0, 2\] may change size"):
        program(x=np.ones((5, 2, 7), np.float32))  # type: ignore[operator]


def test_free_empty_fixes_every_axis() -> None:
    program = _sum_program((4, 3), free=())
    (total,) = program(x=np.ones((4, 3), np.float32))  # type: ignore[operator]
    assert total == 12
    with pytest.raises(FeedError, match="no axis may change size"):
        program(x=np.ones((5, 3), np.float32))  # type: ignore[operator]


def test_a_wrong_rank_is_an_error_even_with_free_axes() -> None:
    program = _sum_program((4, 3), free=(0, 1))
    with pytest.raises(FeedError, match=r"fed an array of shape \[12\]"):
        program(x=np.ones(12, np.float32))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("shape", "free", "match"),
    [
        ((None, 3), None, "has None; give every axis a size"),
        ((4, 3), (2,), "free axis 2 is out of range for rank 2"),
        ((4, 3), (1.5,), "free axes must be integers"),
        ((4, 3), 0, "free must be a sequence of axes"),
    ],
)
def test_bad_free_declarations_are_shape_errors(
    shape: tuple[object, ...], free: object, match: str
) -> None:
    with pytest.raises(ShapeError, match=match):
        Graph().input("x", shape, free=free)  # type: ignore[arg-type]


def test_a_rank_zero_input_has_no_free_axis() -> None:
    x = Graph().input("x", ())
    assert x.node.attrs["free"] == ()


# -- dtype conversions ----------------------------------------------------------------


def test_an_integer_out_of_the_inputs_range_is_an_error() -> None:
    program = _sum_program((2,), "int32")
    with pytest.raises(FeedError, match=r"holds -2147483648\.\.2147483647.*1099511627781"):
        program(x=np.array([2**40 + 5, 1], np.int64))  # type: ignore[operator]
    with pytest.raises(FeedError, match="int32"):
        program(x=[2**40 + 5, 1])  # type: ignore[operator]
    (total,) = program(x=np.array([2**31 - 1, 1], np.int64))  # type: ignore[operator]
    assert total == 2**31


def test_unsigned_values_beyond_a_signed_input_are_an_error() -> None:
    program = _sum_program((1,), "int64")
    with pytest.raises(FeedError, match="int64"):
        program(x=np.array([2**63], np.uint64))  # type: ignore[operator]


def test_a_finite_float_that_would_overflow_is_an_error() -> None:
    program = _sum_program((2,))
    with pytest.raises(
        FeedError, match=r"beyond its range \(e.g. 1e\+300\), which would become infinite"
    ):
        program(x=np.array([1e300, 0.0]))  # type: ignore[operator]
    with pytest.raises(FeedError, match="would become infinite"):
        program(x=[1e300, 0.0])  # type: ignore[operator]


def test_infinities_and_nans_fed_stay_what_they_are() -> None:
    program = _sum_program((2,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionWarning)
        (total,) = program(x=np.array([np.inf, 1.0]))  # type: ignore[operator]
        assert total == np.inf
        (total,) = program(x=np.array([np.nan, 1.0]))  # type: ignore[operator]
        assert np.isnan(total)


def test_an_integer_a_float_input_cannot_hold_exactly_is_an_error() -> None:
    program = _sum_program((2,))
    with pytest.raises(FeedError, match="integers exactly only up to 16777216"):
        program(x=np.array([2**24 + 1, 0], np.int64))  # type: ignore[operator]
    (total,) = program(x=np.array([2**24, 2**30], np.int64))  # type: ignore[operator]
    assert total == 2**24 + 2**30


def test_narrowing_a_float64_array_warns_once_per_program_and_input() -> None:
    program = _sum_program((3,))
    value = np.array([0.1, 0.2, 0.3])
    with pytest.warns(PrecisionWarning, match="'x' is float32: the float64 array fed was rounded"):
        (total,) = program(x=value)  # type: ignore[operator]
    assert total == pytest.approx(0.6, rel=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program(x=value)  # type: ignore[operator]  # the second time is silent
    with pytest.warns(PrecisionWarning):  # another program warns again
        _sum_program((3,))(x=value)  # type: ignore[operator]


def test_python_floats_and_float32_arrays_do_not_warn() -> None:
    g = Graph()
    x = g.input("x", (3,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = evaluate([x * 2.0], {"x": [0.5, 1.5, 2.5]})
        assert out.dtype == np.float32
        assert out.tolist() == [1.0, 3.0, 5.0]
        evaluate([x * 2.0], {"x": np.ones(3, np.float32)})
        wide = Graph().input("w", (2,), "float64")
        (same,) = evaluate([wide + 0.0], {"w": np.array([0.1, 0.2], np.float32)})
        assert same.dtype == np.float64


@pytest.mark.parametrize(
    ("dtype", "value", "match"),
    [
        ("int32", np.array([1.5, 2.0]), "is int32; got a float64 array"),
        ("bool", np.array([1, 0]), "is bool; got a int64 array"),
        ("float32", np.array(["a", "b"]), "got a <U1 array"),
        ("float32", np.array([1j, 2j]), "got a complex128 array"),
        ("float32", [[1.0, 2.0], [3.0]], "cannot make an array of the value fed"),
    ],
)
def test_conversions_that_change_meaning_are_refused(dtype: str, value: object, match: str) -> None:
    program = _sum_program((2,), dtype)
    with pytest.raises(FeedError, match=match):
        program(x=value)  # type: ignore[operator]


def test_bools_feed_integer_and_float_inputs() -> None:
    for dtype in ("int32", "float32"):
        (total,) = _sum_program((3,), dtype)(x=np.array([True, False, True]))  # type: ignore[operator]
        assert total == 2
