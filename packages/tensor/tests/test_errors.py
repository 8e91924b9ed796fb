"""Typed errors whose messages name the op, the shapes and the user's source line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from asgrad.tensor import (
    AsgradError,
    DTypeError,
    FeedError,
    Graph,
    GraphError,
    NameConflictError,
    ShapeError,
    compile,
    get_op,
    make_schedule,
    register_op,
    where,
)


def line_below(n: int = 1) -> str:
    """``file:line`` of the caller's line plus ``n``, as asgrad reports locations."""
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return f"{__file__}:{frame.f_back.f_lineno + n}"


def test_errors_form_one_hierarchy() -> None:
    for exc in (DTypeError, FeedError, GraphError, NameConflictError, ShapeError):
        assert issubclass(exc, AsgradError)
    assert issubclass(NameConflictError, GraphError)
    assert issubclass(ShapeError, ValueError)
    assert issubclass(DTypeError, TypeError)


def test_broadcast_error_names_op_shapes_and_line() -> None:
    g = Graph()
    x, y = g.input("x", (2, 3)), g.input("y", (4,))
    where_ = line_below(2)
    with pytest.raises(ShapeError) as info:
        x + y
    message = str(info.value)
    assert message.startswith("add:")
    assert "[2, 3]" in message
    assert "[4]" in message
    assert where_ in message


def test_matmul_error_names_inner_dimensions_and_line() -> None:
    g = Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (5, 6))
    where_ = line_below(2)
    with pytest.raises(ShapeError) as info:
        a @ b
    message = str(info.value)
    assert "matmul" in message
    assert "[3, 4] @ [5, 6]" in message
    assert "4 != 5" in message
    assert where_ in message


def test_matmul_batch_error_names_batch_dimensions() -> None:
    g = Graph()
    a, b = g.input("a", (2, 3, 4)), g.input("b", (5, 4, 6))
    with pytest.raises(ShapeError, match=r"batch dimensions \[2\] and \[5\]"):
        a @ b


def test_reshape_error_names_counts_and_line() -> None:
    x = Graph().input("x", (2, 3))
    where_ = line_below(2)
    with pytest.raises(ShapeError) as info:
        x.reshape(4, 2)
    message = str(info.value)
    assert message.startswith("reshape:")
    assert "[2, 3]" in message
    assert "[4, 2]" in message
    assert where_ in message


def test_axis_error_names_the_rank() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ShapeError, match="axis 2 is out of bounds for a value of rank 2"):
        x.softmax(axis=2)


def test_dtype_errors() -> None:
    g = Graph()
    f32, f64 = g.input("a", (2,), "float32"), g.input("b", (2,), "float64")
    i64 = g.input("i", (2,), "int64")
    where_ = line_below(2)
    with pytest.raises(DTypeError) as info:
        f32 + f64
    assert "float32[2]" in str(info.value)
    assert "float64[2]" in str(info.value)
    assert str(info.value).startswith("add:")
    assert where_ in str(info.value)
    with pytest.raises(DTypeError, match="exp: input must be a float"):
        i64.exp()
    with pytest.raises(DTypeError, match="condition must be bool"):
        where(f32, f32, f32)
    with pytest.raises(DTypeError, match="unknown dtype"):
        g.input("c", (2,), "float17")
    with pytest.raises(DTypeError, match="not supported"):
        g.input("d", (2,), "complex64")


def test_name_conflicts_are_errors() -> None:
    g = Graph()
    first = line_below()
    g.input("x", (2,))
    with pytest.raises(NameConflictError) as info:
        g.input("x", (3,))
    assert "'x'" in str(info.value)
    assert first in str(info.value)
    with pytest.raises(NameConflictError):
        g.parameter("x", (2,))
    g.parameter("w", (2,))
    with pytest.raises(NameConflictError):
        g.input("w", (2,))
    assert g["x"].shape == (2,)  # the first definition survives


def test_registering_an_op_twice_is_an_error() -> None:
    with pytest.raises(GraphError, match="'add' is already registered"):
        register_op(get_op("add"))
    with pytest.raises(GraphError, match="no op called"):
        get_op("no_such_op")


def test_mixing_graphs_is_an_error() -> None:
    x = Graph("first").input("x", (2,))
    y = Graph("second").input("y", (2,))
    with pytest.raises(GraphError, match="belongs to graph 'second'"):
        x + y
    with pytest.raises(GraphError, match="different graphs"):
        make_schedule([x, y])


def test_symbolic_tensors_have_no_truth_value() -> None:
    x = Graph().input("x", (2,))
    with pytest.raises(GraphError, match="where"):
        bool(x > 0)


def _program() -> tuple[str, object]:
    g = Graph()
    x = g.input("x", (3, 4), free=(0, 1))
    w = g.input("w", (4, 5))
    i = g.input("i", (3,), "int64")
    where_ = line_below()
    y = (x @ w).sum() + i.cast("float32").sum()
    return where_, compile([y])


def _feeds(**over: object) -> dict[str, object]:
    feeds: dict[str, object] = {
        "x": np.ones((3, 4), np.float32),
        "w": np.ones((4, 5), np.float32),
        "i": np.arange(3),
    }
    feeds.update(over)
    return {k: v for k, v in feeds.items() if v is not None}


def test_missing_feed_is_an_error() -> None:
    _, program = _program()
    with pytest.raises(FeedError, match=r"'w' was not fed.*w: float32\[4, 5\]"):
        program(_feeds(w=None))  # type: ignore[operator]  # Program is callable


def test_wrong_dtype_feed_is_an_error() -> None:
    _, program = _program()
    with pytest.raises(FeedError, match="'i' is int64; got a float64 array"):
        program(_feeds(i=np.ones(3)))  # type: ignore[operator]  # Program is callable


def test_wrong_rank_feed_is_an_error() -> None:
    _, program = _program()
    with pytest.raises(
        FeedError, match=r"'x' was declared float32\[3, 4\].*fed an array of shape \[12\]"
    ):
        program(_feeds(x=np.ones(12, np.float32)))  # type: ignore[operator]  # Program is callable


def test_wrong_shape_feed_names_the_op_and_line() -> None:
    where_, program = _program()
    with pytest.raises(FeedError) as info:
        program(_feeds(x=np.ones((3, 6), np.float32)))  # type: ignore[operator]  # Program is callable
    message = str(info.value)
    assert "matmul" in message
    assert "[3, 6] @ [4, 5]" in message
    assert where_ in message


def test_unknown_feed_is_an_error() -> None:
    _, program = _program()
    with pytest.raises(FeedError, match="'z' is not an input"):
        program(_feeds(z=np.ones(2)))  # type: ignore[operator]  # Program is callable
