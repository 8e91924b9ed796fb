"""``x[i, j]`` with several index arrays checks each against its own axis, and a
boolean mask must have the shape of the axes it selects (numpy's rules).

Several arrays combine into one flat position; a check of that position alone let
``x[i, j]`` with ``j`` past its axis read an element of another row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, OutOfRangeError, evaluate

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def _pick(i: list[int], j: list[int], backend: str) -> np.ndarray:
    g = Graph()
    x = g.input("x", X.shape)
    ti, tj = g.input("i", (len(i),), "int64"), g.input("j", (len(j),), "int64")
    feeds = {"x": X, "i": np.array(i), "j": np.array(j)}
    (got,) = evaluate([x[ti, tj]], feeds, backend=backend)
    return got


BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("i", "j", "bad"),
    [([1, 2], [4, 0], 4), ([1, 2], [-1, 0], -1), ([3, 0], [0, 1], 3), ([0, -1], [0, 0], -1)],
)
def test_each_index_array_is_checked_against_its_own_axis(
    i: list[int], j: list[int], bad: int, backend: str
) -> None:
    with pytest.raises(OutOfRangeError, match=f"index {bad}"):
        _pick(i, j, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_indices_in_range_still_pick_per_axis(backend: str) -> None:
    np.testing.assert_array_equal(_pick([1, 2, 0], [3, 0, 2], backend), X[[1, 2, 0], [3, 0, 2]])


@pytest.mark.parametrize(
    ("shape", "index"),
    [
        ((10, 3), ([True, False],)),
        ((10, 3), (slice(None), np.ones(4, bool))),
        ((2, 3), (np.ones((2, 2), bool),)),
        ((2, 3, 4), (Ellipsis, np.ones(3, bool))),
    ],
)
def test_a_boolean_mask_of_the_wrong_shape_is_an_index_error(
    shape: tuple[int, ...], index: Any
) -> None:
    g = Graph()
    x = g.input("x", shape)
    with pytest.raises(IndexError, match="boolean index of shape"):
        x[index]
    with pytest.raises(IndexError):  # numpy agrees
        np.zeros(shape)[index]


@pytest.mark.parametrize(
    ("shape", "index"),
    [
        ((10, 3), (np.arange(10) % 3 == 0,)),
        ((2, 3, 4), (Ellipsis, np.array([True, False, True, True]))),
        ((2, 3, 4), (0, np.array([True, False, True]))),
        ((2, 3), (np.array([[True, False, True], [False, False, True]]),)),
    ],
)
def test_a_boolean_mask_of_the_right_shape_selects_as_numpy_does(
    shape: tuple[int, ...], index: Any
) -> None:
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    g = Graph()
    (got,) = evaluate([g.input("x", shape)[index]], {"x": data})
    np.testing.assert_array_equal(got, data[index])
