"""A symbolic Tensor meets numpy: ufuncs and arrays build graph ops, and what numpy cannot
do with a symbolic value says so."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from asgrad.tensor import ArgumentTypeError, Graph, GraphError, Tensor, compile, evaluate


def _x() -> Tensor:
    return Graph().input("x", (3,))


ARRAY = np.array([1.0, 2.0, 4.0], np.float32)
FEED = np.array([2.0, 2.0, 2.0], np.float32)


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda x: ARRAY + x, ARRAY + FEED),
        (lambda x: ARRAY - x, ARRAY - FEED),
        (lambda x: ARRAY * x, ARRAY * FEED),
        (lambda x: ARRAY / x, ARRAY / FEED),
        (lambda x: x > ARRAY, ARRAY < FEED),
        (lambda x: x <= ARRAY, ARRAY >= FEED),
        (lambda x: np.maximum(ARRAY, x), np.maximum(ARRAY, FEED)),
        (lambda x: np.exp(x), np.exp(FEED)),
        (lambda x: np.negative(x), -FEED),
        (lambda x: np.add(x, ARRAY), FEED + ARRAY),
    ],
)
def test_numpy_ufuncs_with_a_graph_op_build_it(
    build: Callable[[Tensor], Tensor], expected: np.ndarray
) -> None:
    x = _x()
    out = build(x)
    assert isinstance(out, Tensor)
    np.testing.assert_allclose(evaluate([out], {"x": FEED})[0], expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("use", "match"),
    [
        (lambda x: np.asarray(x), "numpy cannot convert it"),
        (lambda x: list(x), "cannot be iterated"),
        (lambda x: next(iter(x)), "cannot be iterated"),
        (lambda x: np.arctan2(x, x), "numpy's arctan2"),
        (lambda x: np.add(x, ARRAY, out=np.zeros(3, np.float32)), "numpy's add"),
        (lambda x: np.add.reduce(x), "numpy's add \\(reduce\\)"),
    ],
)
def test_what_numpy_cannot_do_with_a_symbolic_tensor_says_so(
    use: Callable[[Tensor], object], match: str
) -> None:
    with pytest.raises(ArgumentTypeError, match=match):
        use(_x())


def test_values_of_two_unnamed_graphs_tell_the_graphs_apart() -> None:
    a, b = Graph(), Graph()
    x, y = a.input("x", (2,)), b.input("y", (2,))
    with pytest.raises(GraphError) as info:
        x + y
    message = str(info.value)
    assert f"(#{a.serial})" in message
    assert f"(#{b.serial})" in message
    assert a.serial != b.serial
    with pytest.raises(GraphError, match="outputs come from different graphs") as info:
        compile([x, y])
    assert f"(#{a.serial})" in str(info.value)
    assert f"(#{b.serial})" in str(info.value)
