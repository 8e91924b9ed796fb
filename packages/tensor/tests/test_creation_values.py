"""Values made in a graph (creation functions, constants) follow the feed rule: a size,
dtype or value they cannot honour is a typed error when the graph is built, never a
numpy error, a tensor of negative shape, or a value silently changed."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.tensor import (
    DTypeError,
    Graph,
    ShapeError,
    arange,
    evaluate,
    eye,
    full,
    linspace,
    rand,
    randn,
)


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda g: eye(g, -1), ShapeError, "eye: sizes must be >= 0"),
        (lambda g: eye(g, 2, -2), ShapeError, "eye: sizes must be >= 0"),
        (lambda g: rand(g, -3, 3), ShapeError, "rand: sizes must be >= 0"),
        (lambda g: randn(g, 2, -1), ShapeError, "randn: sizes must be >= 0"),
        (lambda g: full(g, (2,), 2**40, dtype="int32"), DTypeError, "full: int32 holds"),
        (lambda g: full(g, (2,), -(2**63) - 1, dtype="int64"), DTypeError, "full: int64 holds"),
        (lambda g: arange(g, 2**31, 2**31 + 3, dtype="int32"), DTypeError, "arange: int32"),
        (lambda g: arange(g, 0, 2**31 + 1, 2**30, dtype="int32"), DTypeError, "not 2147483648"),
        (lambda g: linspace(g, 0, 1, 5, dtype="bool"), DTypeError, "linspace: .*numeric dtype"),
        (lambda g: g.constant(np.array([1e300])), DTypeError, "float32 cannot hold 1e\\+300"),
        (lambda g: g.constant([1.0, -3e39], "float32"), DTypeError, "float32 cannot hold -3e\\+39"),
        (lambda g: g.constant([1, 2**40], "int32"), DTypeError, "constant: int32 holds"),
    ],
)
def test_a_value_the_graph_cannot_make_is_a_typed_build_time_error(
    make: Callable[[Graph], object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        make(Graph())


def test_values_in_range_are_made_unchanged() -> None:
    g = Graph()
    got = evaluate(
        [
            full(g, (2,), 2**31 - 1, dtype="int32"),
            arange(g, 2**31 - 3, 2**31 - 1, dtype="int32"),
            arange(g, 5, 0, -2),
            eye(g, 0, 2),
            g.constant(np.array([3e38, np.inf, -1.0])),
            g.constant(np.array([1e300]), "float64"),
            linspace(g, 0, 4, 5, dtype="int32"),
        ]
    )
    assert got[0].tolist() == [2**31 - 1] * 2
    assert got[1].tolist() == [2**31 - 3, 2**31 - 2]
    assert got[2].tolist() == [5, 3, 1]
    assert got[3].shape == (0, 2)
    assert got[4].dtype == np.float32
    assert np.isposinf(got[4][1])
    assert got[4][0] == np.float32(3e38)
    assert got[5].tolist() == [1e300]
    assert got[6].tolist() == [0, 1, 2, 3, 4]
