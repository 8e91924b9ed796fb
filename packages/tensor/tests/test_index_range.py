"""Integer index arrays out of range raise an ``OutOfRangeError`` on the CPU.

``gather`` (and so ``embedding`` and ``x[:, idx]``), ``scatter_add`` (gather's
gradient) and ``one_hot`` accept indices in ``[0, n)`` only. A negative index is an
error, not a count from the end (numpy would wrap it silently), and an index ``>= n``
is an asgrad error naming the op, the value and the valid range, never a bare numpy
``IndexError`` or a bincount ``ValueError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, OutOfRangeError, evaluate
from asgrad.tensor.api.nn_functional import embedding
from asgrad.tensor.errors import AsgradError
from asgrad.tensor.ops.index import check_indices

TABLE = np.arange(12.0, dtype=np.float32).reshape(4, 3)


def _gather(idx: np.ndarray, axis: int = 0) -> list[np.ndarray]:
    g = Graph()
    x = g.input("x", TABLE.shape)
    i = g.input("i", idx.shape, str(idx.dtype))
    return evaluate(x.gather(i, axis=axis), {"x": TABLE, "i": idx})


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_gather_refuses_a_negative_index_instead_of_wrapping(dtype: str) -> None:
    with pytest.raises(OutOfRangeError) as info:
        _gather(np.array([0, -1], dtype))
    message = str(info.value)
    assert "gather" in message
    assert "index -1" in message
    assert "[0, 3]" in message
    assert "negative" in message


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_gather_refuses_an_index_past_the_end_with_an_asgrad_error(dtype: str) -> None:
    with pytest.raises(OutOfRangeError, match=r"gather: index 4 .*axis 0 of size 4.*\[0, 3\]"):
        _gather(np.array([[1, 4], [0, 2]], dtype))


def test_gather_along_axis_1_checks_that_axis() -> None:
    with pytest.raises(OutOfRangeError, match=r"index 3 .*axis 1 of size 3"):
        _gather(np.array([3]), axis=1)
    with pytest.raises(OutOfRangeError, match=r"index -3 "):
        _gather(np.array([0, -3]), axis=1)
    assert np.array_equal(_gather(np.array([2, 0]), axis=1)[0], TABLE[:, [2, 0]])


def test_valid_indices_still_gather_including_both_ends() -> None:
    idx = np.array([3, 0, 3, 1])
    assert np.array_equal(_gather(idx)[0], TABLE[idx])
    assert _gather(np.zeros((0,), np.int64))[0].shape == (0, 3)


def test_tensor_indexing_and_embedding_check_their_indices() -> None:
    g = Graph()
    x = g.input("x", TABLE.shape)
    i = g.input("i", (2,), "int64")
    feeds = {"x": TABLE, "i": np.array([1, -2])}
    with pytest.raises(OutOfRangeError, match="index -2"):
        evaluate(x[i], feeds)
    with pytest.raises(OutOfRangeError, match="index -2"):
        evaluate(embedding(i, x), feeds)
    with pytest.raises(OutOfRangeError, match="index 5"):
        evaluate(x[:, i], {"x": TABLE, "i": np.array([0, 5])})


@pytest.mark.parametrize(
    ("g_shape", "idx", "x_shape", "axis"),
    [
        ((2, 3), np.array([1, 4]), (4, 3), 0),  # the bincount path (embedding gradients)
        ((2, 3), np.array([1, -1]), (4, 3), 0),
        ((2, 2, 3), np.array([[0, 1], [2, 7]]), (4, 3), 0),  # np.add.at
        ((4, 2), np.array([0, -1]), (4, 3), 1),
    ],
)
def test_scatter_add_checks_its_indices_on_every_path(
    g_shape: tuple[int, ...], idx: np.ndarray, x_shape: tuple[int, ...], axis: int
) -> None:
    g = Graph()
    grad = g.input("g", g_shape)
    i = g.input("i", idx.shape, "int64")
    x = g.input("x", x_shape)
    out = g.apply("scatter_add", (grad, i, x), {"axis": axis})
    feeds = {"g": np.ones(g_shape, np.float32), "i": idx, "x": np.zeros(x_shape, np.float32)}
    with pytest.raises(OutOfRangeError, match=f"scatter_add: index {idx.flat[-1]} "):
        evaluate(out, feeds)


def test_scatter_add_with_valid_indices_adds_repeats() -> None:
    g = Graph()
    grad, i, x = g.input("g", (3, 2)), g.input("i", (3,), "int64"), g.input("x", (4, 2))
    out = g.apply("scatter_add", (grad, i, x), {"axis": 0})
    feeds = {
        "g": np.ones((3, 2), np.float32),
        "i": np.array([3, 0, 3]),
        "x": np.zeros((4, 2), np.float32),
    }
    expected = np.array([[1, 1], [0, 0], [0, 0], [2, 2]], np.float32)
    assert np.array_equal(evaluate(out, feeds)[0], expected)


@pytest.mark.parametrize("bad", [-1, 3, 100])
def test_one_hot_refuses_out_of_range_labels_instead_of_a_zero_row(bad: int) -> None:
    g = Graph()
    labels = g.input("y", (3,), "int64")
    with pytest.raises(OutOfRangeError, match=rf"one_hot: index {bad} .*depth 3.*\[0, 2\]"):
        evaluate(labels.one_hot(3), {"y": np.array([0, bad, 2])})
    ok = evaluate(labels.one_hot(3), {"y": np.array([0, 2, 1])})[0]
    assert np.array_equal(ok, np.eye(3, dtype=np.float32)[[0, 2, 1]])


def test_constant_indices_folded_before_running_raise_too() -> None:
    g = Graph()
    folded = g.constant(TABLE).gather(g.constant(np.array([0, -1])))
    with pytest.raises(OutOfRangeError, match="index -1"):
        evaluate(folded, {})
    x = g.input("x", TABLE.shape)
    with pytest.raises(OutOfRangeError, match="index 9"):
        evaluate(x.gather(g.constant(np.array([9]))), {"x": TABLE})
    with pytest.raises(OutOfRangeError, match="index -1"):
        evaluate(g.constant(np.array([-1])).one_hot(2), {})


def test_the_error_is_an_asgrad_error_and_an_index_error() -> None:
    with pytest.raises(OutOfRangeError) as info:
        _gather(np.array([4]))
    assert isinstance(info.value, AsgradError)
    assert isinstance(info.value, IndexError)


def test_check_indices_reads_strided_and_empty_arrays() -> None:
    strided = np.arange(10, dtype=np.int64)[::-2]  # 9, 7, 5, 3, 1: a negative stride
    check_indices("op", strided, 10, "size 10")
    with pytest.raises(OutOfRangeError, match="index 9 "):
        check_indices("op", strided, 9, "size 9")
    check_indices("op", np.zeros((0, 3), np.int32), 0, "size 0")
    with pytest.raises(OutOfRangeError, match="no index is valid"):
        check_indices("op", np.zeros((1,), np.int32), 0, "size 0")
    extreme = np.array([np.iinfo(np.int64).min, 0])
    with pytest.raises(OutOfRangeError, match=f"index {np.iinfo(np.int64).min} "):
        check_indices("op", extreme, 5, "size 5")
