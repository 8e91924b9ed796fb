"""Bad input raises a typed asgrad error naming the problem, never a raw numpy or Python one.

Before, an axis out of range reached numpy (``AxisError`` at run time for a
scalar), softmax over a zero-size axis and argmax over an empty one raised numpy's
``ValueError``, sizes given as floats were truncated silently (``reshape(6.5, 2)``),
shapes whose element count overflows int64 were accepted, and an axis out of range on a
reduction did not name the user's source line as the other shape errors do.

Each row builds one bad value; the error's class and message are checked, and for
errors raised while the graph is built, that the message ends with this file's line of
the row (``(at file:line)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import (
    ArgumentError,
    ArgumentTypeError,
    AsgradError,
    FeedError,
    Graph,
    ShapeError,
    Tensor,
    evaluate,
)

BIG = 2**40


def _x(shape: tuple[int, ...] = (3, 4)) -> Any:
    """An input of ``shape`` (typed Any: rows pass deliberately wrong arguments)."""
    return Graph().input("x", shape)


Row = tuple[str, Callable[[], object], type[AsgradError], tuple[str, ...]]

# Raised while the graph is built: the message names the op and the row's line.
LOCATED: list[Row] = [
    ("sum axis 2", lambda: _x().sum(axis=2), ShapeError, ("sum:", "axis 2", "rank 2")),
    ("mean axis -3", lambda: _x().mean(axis=-3), ShapeError, ("mean:", "axis -3", "[-2, 1]")),
    ("max axes (0, 5)", lambda: _x().max(axis=(0, 5)), ShapeError, ("max:", "axis 5")),
    ("min axis 9", lambda: _x().min(axis=9), ShapeError, ("min:", "axis 9")),
    ("var axis 2", lambda: _x().var(axis=2), ShapeError, ("var:", "axis 2")),
    ("sum axis repeated", lambda: _x().sum(axis=(1, -1)), ShapeError, ("sum:", "repeats")),
    ("argmax axis 2", lambda: _x().argmax(axis=2), ShapeError, ("argmax:", "axis 2")),
    ("softmax axis 2", lambda: _x().softmax(axis=2), ShapeError, ("softmax:", "axis 2")),
    ("log_softmax -3", lambda: _x().log_softmax(axis=-3), ShapeError, ("log_softmax:",)),
    ("transpose axis 2", lambda: _x().transpose(0, 2), ShapeError, ("transpose:", "axis 2")),
    ("swapaxes axis 5", lambda: _x().swapaxes(0, 5), ShapeError, ("swapaxes:", "axis 5")),
    ("squeeze axis 5", lambda: _x().squeeze(5), ShapeError, ("squeeze:", "axis 5")),
    ("flatten axis 5", lambda: _x().flatten(5), ShapeError, ("flatten:", "axis 5")),
    ("scalar sum axis 0", lambda: _x(()).sum(axis=0), ShapeError, ("sum:", "rank 0")),
    ("scalar max axis 0", lambda: _x(()).max(axis=0), ShapeError, ("max:", "rank 0")),
    ("scalar squeeze 0", lambda: _x(()).squeeze(0), ShapeError, ("squeeze:", "rank 0")),
    ("softmax of []", lambda: _x((3, 0)).softmax(axis=1), ShapeError, ("softmax:", "size 0")),
    ("log_softmax of []", lambda: _x((3, 0)).log_softmax(), ShapeError, ("size 0",)),
    ("argmax of []", lambda: _x((3, 0)).argmax(axis=1), ShapeError, ("argmax:", "size 0")),
    ("argmax, 0 rows", lambda: _x((0, 3)).argmax(axis=0), ShapeError, ("axis 0", "size 0")),
    ("broadcast huge", lambda: _x((1,)).broadcast_to(BIG, BIG), ShapeError, ("int64",)),
    ("outer huge", lambda: (lambda c: c * c.T)(_x((2**33, 1))), ShapeError, ("mul:", "int64")),
    ("reshape 6.5", lambda: _x().reshape(6.5, 2), ArgumentTypeError, ("reshape:", "6.5")),
    ("reshape 'a'", lambda: _x().reshape("a"), ArgumentTypeError, ("reshape:", "integers")),
    ("reshape None", lambda: _x().reshape(None), ArgumentTypeError, ("reshape:",)),
    ("transpose 1.5", lambda: _x().transpose(1.5, 0), ArgumentTypeError, ("transpose:",)),
    ("broadcast 2.5", lambda: _x().broadcast_to(3, 4.5), ArgumentTypeError, ("broadcast_to",)),
    ("expand_dims 1.5", lambda: _x().expand_dims(1.5), ArgumentTypeError, ("expand_dims:",)),
    ("one_hot 2.5", lambda: _x().cast("int64").one_hot(2.5), ArgumentTypeError, ("depth",)),
    ("leaky_relu 'a'", lambda: _x().leaky_relu("a"), ArgumentTypeError, ("alpha", "'a'")),
    ("clamp 'a'", lambda: _x().clamp(min="a"), ArgumentTypeError, ("clamp:", "min")),
    ("two ellipses", lambda: _x()[..., ...], AsgradError, ("index:", "single ellipsis")),
]

# Leaves: the message names the leaf.
UNLOCATED: list[Row] = [
    ("input huge", lambda: _x((BIG, BIG)), ShapeError, ("input 'x'", "int64")),
    ("parameter huge", lambda: Graph().parameter("p", (BIG, BIG)), ShapeError, ("'p'", "int64")),
    ("parameter bytes", lambda: Graph().parameter("p", (2**62,)), ShapeError, ("4 bytes",)),
    ("input 3.5", lambda: _x((3.5, 2)), ShapeError, ("input 'x'", "ints")),
    ("input 'ab'", lambda: _x("ab"), ShapeError, ("input 'x'", "ints")),
    ("constant ragged", lambda: Graph().constant([[1, 2], [3]]), ArgumentError, ("constant",)),
]


@pytest.mark.parametrize(("label", "call", "error", "parts"), LOCATED, ids=[r[0] for r in LOCATED])
def test_building_with_bad_input_names_the_problem_and_the_line(
    label: str, call: Callable[[], object], error: type[AsgradError], parts: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for part in parts:
        assert part in message, (label, message)
    assert message.endswith(f"(at {__file__}:{call.__code__.co_firstlineno})"), message


@pytest.mark.parametrize(
    ("label", "call", "error", "parts"), UNLOCATED, ids=[r[0] for r in UNLOCATED]
)
def test_bad_leaves_name_the_problem(
    label: str, call: Callable[[], object], error: type[AsgradError], parts: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        call()
    for part in parts:
        assert part in str(info.value), (label, str(info.value))


def _run(build: Callable[[Any], Tensor], fed: tuple[int, ...]) -> np.ndarray:
    g = Graph()
    out = build(g.input("x", (2, 3)))
    (value,) = evaluate([out], {"x": np.ones(fed, np.float32)})
    return value


@pytest.mark.parametrize(
    ("build", "op"),
    [
        (lambda x: x.softmax(axis=0), "softmax"),
        (lambda x: x.log_softmax(axis=0), "log_softmax"),
        (lambda x: x.argmax(axis=0), "argmax"),
    ],
)
def test_a_fed_shape_that_empties_the_axis_is_a_feed_error(
    build: Callable[[Any], Tensor], op: str
) -> None:
    """The infer rule runs again for each new set of fed shapes, so the check that
    refuses an empty declared axis refuses an empty fed one before numpy sees it."""
    with pytest.raises(FeedError) as info:
        _run(build, (0, 3))
    message = str(info.value)
    assert f"{op} (made at {__file__}:" in message
    assert "axis 0 of float32[0, 3]" in message
    assert "size 0" in message


def test_an_empty_batch_still_runs_where_the_axis_is_not_empty() -> None:
    assert _run(lambda x: x.softmax(axis=1), (0, 3)).shape == (0, 3)
    assert _run(lambda x: x.argmax(axis=1), (0, 3)).shape == (0,)


def test_valid_axes_sizes_and_shapes_still_work() -> None:
    x = _x((2, 3))
    assert x.sum(axis=-1).shape == (2,)
    assert x.argmax(axis=np.int64(0)).shape == (3,)
    assert x.reshape(np.int64(3), 2).shape == (3, 2)
    assert x.transpose(np.int32(1), 0).shape == (3, 2)
    assert Graph().input("y", (np.int64(4), 2)).shape == (4, 2)
    assert _x(()).sum().shape == ()
    assert Graph().constant([[1.0, 2.0], [3.0, 4.0]]).shape == (2, 2)


def test_concat_and_stack_axes_name_the_users_line() -> None:
    from asgrad.tensor.api.functional import concat, stack

    x = Graph().input("x", (2, 3))
    for fn, name in ((concat, "concat"), (stack, "stack")):
        with pytest.raises(ShapeError, match=rf"{name}: axis 5 is out of bounds") as info:
            fn([x, x], axis=5)
        assert __file__ in str(info.value)


def test_layer_norm_refuses_a_fractional_normalized_shape() -> None:
    from asgrad.tensor.api.nn_functional import layer_norm
    from asgrad.tensor.errors import ArgumentTypeError

    x = Graph().input("x", (2, 4))
    with pytest.raises(ArgumentTypeError, match=r"normalized_shape must be an integer, got 4\.5"):
        layer_norm(x, normalized_shape=(4.5,))
