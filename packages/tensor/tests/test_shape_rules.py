"""Property tests: asgrad's shape rules agree with numpy's.

Broadcasting, reshape with -1, matmul batch dimensions, reductions, transposes
and basic indexing, each compared with numpy on random shapes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asgrad.tensor import Graph, ShapeError, evaluate

settings.register_profile("asgrad-shapes", max_examples=60, deadline=None)
settings.load_profile("asgrad-shapes")

dims = st.integers(min_value=1, max_value=4)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)
shapes_1_to_4 = st.lists(dims, min_size=1, max_size=4).map(tuple)


def _arange(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(math.prod(shape), dtype=np.float64).reshape(shape) - 3.0


@given(shapes, shapes)
def test_broadcast_shape_is_numpys(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    g = Graph()
    x, y = g.input("x", a, "float64"), g.input("y", b, "float64")
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ShapeError, match="do not broadcast"):
            x + y
        return
    out = x * y
    assert out.shape == expected
    (value,) = evaluate([out], {"x": _arange(a), "y": _arange(b)})
    np.testing.assert_array_equal(value, _arange(a) * _arange(b))


@given(shapes, st.data())
def test_reshape_keeps_element_count(shape: tuple[int, ...], data: st.DataObject) -> None:
    size = math.prod(shape)
    # A target with the same element count: a random factorisation of ``size``.
    target: list[int] = []
    rest = size
    for _ in range(data.draw(st.integers(0, 3))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = data.draw(st.sampled_from(divisors))
        target.append(d)
        rest //= d
    target.append(rest)
    if data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    g = Graph()
    x = g.input("x", shape, "float64")
    out = x.reshape(target)
    assert out.shape == np.reshape(_arange(shape), target).shape
    (value,) = evaluate([out], {"x": _arange(shape)})
    np.testing.assert_array_equal(value, np.reshape(_arange(shape), target))


@given(shapes_1_to_4, st.lists(dims, min_size=1, max_size=3))
def test_reshape_with_wrong_count_raises(shape: tuple[int, ...], target: list[int]) -> None:
    g = Graph()
    x = g.input("x", shape, "float64")
    if math.prod(target) == math.prod(shape):
        assert x.reshape(target).shape == tuple(target)
    else:
        with pytest.raises(ShapeError, match="reshape"):
            x.reshape(target)


def test_reshape_rejects_two_minus_ones() -> None:
    x = Graph().input("x", (2, 6))
    with pytest.raises(ShapeError, match="more than one -1"):
        x.reshape(-1, -1)


batch = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@given(batch, batch, dims, dims, dims, dims)
def test_matmul_batch_broadcasting(
    ba: tuple[int, ...], bb: tuple[int, ...], n: int, k: int, k2: int, m: int
) -> None:
    a_shape, b_shape = (*ba, n, k), (*bb, k2, m)
    g = Graph()
    a, b = g.input("a", a_shape, "float64"), g.input("b", b_shape, "float64")
    try:
        expected = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    except ValueError:
        pattern = "inner dimensions" if k != k2 else "batch dimensions"
        with pytest.raises(ShapeError, match=pattern):
            a @ b
        return
    out = a @ b
    assert out.shape == expected
    A, B = _arange(a_shape) / 7.0, _arange(b_shape) / 5.0
    (value,) = evaluate([out], {"a": A, "b": B})
    np.testing.assert_allclose(value, A @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("a", "b"), [((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((4,), (2, 4, 3))]
)
def test_matmul_of_vectors_follows_numpy(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    g = Graph()
    x, y = g.input("x", a, "float64"), g.input("y", b, "float64")
    out = x @ y
    A, B = _arange(a), _arange(b)
    assert out.shape == np.matmul(A, B).shape
    np.testing.assert_allclose(evaluate([out], {"x": A, "y": B})[0], A @ B)


reduce_ops = st.sampled_from(["sum", "mean", "max", "min", "var"])


@given(shapes_1_to_4, st.data(), reduce_ops, st.booleans())
def test_reductions_match_numpy(
    shape: tuple[int, ...], data: st.DataObject, op: str, keepdims: bool
) -> None:
    ndim = len(shape)
    axis: int | tuple[int, ...] | None
    choice = data.draw(st.sampled_from(["none", "int", "tuple"]))
    if choice == "none":
        axis = None
    elif choice == "int":
        axis = data.draw(st.integers(-ndim, ndim - 1))
    else:
        picked = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
        axis = tuple(a - ndim if data.draw(st.booleans()) else a for a in picked)
    X = np.random.default_rng(len(shape)).standard_normal(shape)
    expected = getattr(np, op)(X, axis=axis, keepdims=keepdims)
    g = Graph()
    x = g.input("x", shape, "float64")
    out = getattr(x, op)(axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(evaluate([out], {"x": X})[0], expected, rtol=1e-10, atol=1e-12)


@given(shapes_1_to_4, st.integers(-6, 6))
def test_reduction_axis_bounds(shape: tuple[int, ...], axis: int) -> None:
    x = Graph().input("x", shape)
    if -len(shape) <= axis < len(shape):
        assert x.sum(axis=axis).ndim == len(shape) - 1
    else:
        with pytest.raises(ShapeError, match="out of bounds"):
            x.sum(axis=axis)


def test_reduction_repeated_axis_raises() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ShapeError, match="repeats"):
        x.sum(axis=(1, -1))


@given(shapes_1_to_4, st.data())
def test_transpose_permutations(shape: tuple[int, ...], data: st.DataObject) -> None:
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    X = _arange(shape)
    g = Graph()
    x = g.input("x", shape, "float64")
    out = x.transpose(perm)
    assert out.shape == np.transpose(X, perm).shape
    outs = [out, x.T]
    if len(shape) >= 2:
        outs.append(x.swapaxes(0, -1))
    values = evaluate(outs, {"x": X})
    np.testing.assert_array_equal(values[0], np.transpose(X, perm))
    np.testing.assert_array_equal(values[1], X.T)
    if len(shape) >= 2:
        np.testing.assert_array_equal(values[2], np.swapaxes(X, 0, -1))


def test_transpose_rejects_non_permutation() -> None:
    x = Graph().input("x", (2, 3, 4))
    with pytest.raises(ShapeError, match="not a permutation"):
        x.transpose(0, 0, 1)


@st.composite
def basic_indices(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[object, ...]:
    """A numpy basic index for ``shape``: ints, slices (negative steps), None, ..."""
    items: list[object] = []
    n_index = draw(st.integers(0, len(shape)))
    ellipsis_at = draw(st.none() | st.integers(0, n_index))
    for i in range(n_index):
        if ellipsis_at == i:
            items.append(Ellipsis)
        while draw(st.integers(0, 4)) == 0:
            items.append(None)
        size = shape[i]
        if draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.none() | st.integers(-size - 2, size + 2)
            step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
            items.append(slice(draw(bound), draw(bound), step))
    if ellipsis_at == n_index:
        items.append(Ellipsis)
    if draw(st.booleans()):
        items.append(None)
    if ellipsis_at is not None:
        # Indices after '...' refer to the last axes; keep them in bounds there.
        return tuple(items) if n_index == 0 else _realign(tuple(items), shape)
    return tuple(items)


def _realign(items: tuple[object, ...], shape: tuple[int, ...]) -> tuple[object, ...]:
    """Clamp int indices after an Ellipsis to the sizes of the axes they now hit."""
    at = items.index(Ellipsis)
    after = [i for i in items[at + 1 :] if i is not None]
    first = len(shape) - len(after)
    out = list(items[: at + 1])
    axis = first
    for item in items[at + 1 :]:
        if isinstance(item, int):
            out.append(item % shape[axis])
            axis += 1
        else:
            out.append(item)
            axis += item is not None
    return tuple(out)


@given(shapes_1_to_4, st.data())
def test_slicing_matches_numpy_basic_indexing(shape: tuple[int, ...], data: st.DataObject) -> None:
    index = data.draw(basic_indices(shape))
    X = _arange(shape)
    expected = X[index]  # type: ignore[index]  # numpy stubs omit None and Ellipsis
    g = Graph()
    x = g.input("x", shape, "float64")
    out = x[index]
    assert out.shape == expected.shape, index
    np.testing.assert_array_equal(evaluate([out], {"x": X})[0], expected)


def test_slicing_errors() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ShapeError, match="out of bounds"):
        x[2]
    with pytest.raises(ShapeError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
