"""Rank-0 values and index edge cases: typed errors at build time, never at run time."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import ArgumentTypeError, Graph, ShapeError, evaluate


@pytest.mark.parametrize("method", ["sum", "mean", "var", "max", "min", "squeeze", "argmax"])
@pytest.mark.parametrize("axis", [0, -1])
def test_an_axis_of_a_scalar_is_a_build_time_shape_error(method: str, axis: int) -> None:
    # numpy rejects both (AxisError); asgrad treats 0 and -1 alike, when the op is built.
    x = Graph().input("x", ())
    with pytest.raises(ShapeError, match=rf"{method}: axis {axis} is out of bounds.*rank 0"):
        getattr(x, method)(axis)


def test_reductions_of_a_scalar_over_no_axis_run() -> None:
    g = Graph()
    x = g.input("x", ())
    got = evaluate([x.sum(), x.mean(), x.max(), x.var()], {"x": np.float32(3.0)})
    assert [float(v) for v in got] == [3.0, 3.0, 3.0, 0.0]


@pytest.mark.parametrize("index", [slice(None), (Ellipsis, slice(None)), 0])
def test_indexing_a_scalar_is_an_error(index: object) -> None:
    x = Graph().input("x", ())
    with pytest.raises(ShapeError, match="too many indices"):
        x[index]


def test_too_many_indices_name_the_shape() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ShapeError, match=r"shape \[2, 3\]: 3 given"):
        x[:, :, :]


def test_a_scalar_with_ellipsis_is_itself() -> None:
    x = Graph().input("x", ())
    assert x[...] is x


@pytest.mark.parametrize("make", ["start", "stop", "step"])
def test_a_tensor_slice_bound_says_bounds_must_be_ints(make: str) -> None:
    g = Graph()
    v = g.input("v", (5,))
    t = g.input("t", (), "int64")
    bounds = {"start": slice(t, None), "stop": slice(None, t), "step": slice(None, None, t)}
    with pytest.raises(ArgumentTypeError, match="slice bounds must be Python ints"):
        v[bounds[make]]


def test_a_float_slice_bound_is_an_error() -> None:
    v = Graph().input("v", (5,))
    with pytest.raises(ArgumentTypeError, match="slice bounds must be Python ints"):
        v[:2.5]  # type: ignore[misc]  # the wrong type on purpose


@pytest.mark.parametrize("decay", [False, True])
def test_adam_update_of_a_scalar_parameter_runs_on_the_numpy_path(decay: bool) -> None:
    from asgrad.tensor.cpu import jit

    g = Graph()
    names = ["p", "m", "v", "step_size", "bc2_sqrt"] + (["decay"] if decay else [])
    ins = tuple(g.input(n, (), "float32") for n in names)
    out = g.apply("adam_update", ins, {"eps": 1e-8})
    feeds = dict(zip(names, (1.5, 0.2, 0.04, 0.1, 0.5, 0.9), strict=False))
    want = (1.5 * (0.9 if decay else 1.0)) - 0.1 * 0.2 / (np.sqrt(0.04) / 0.5 + 1e-8)
    jit.set_enabled(False)
    try:
        (got,) = evaluate([out], {k: np.float32(v) for k, v in feeds.items()})
    finally:
        jit.set_enabled(None)
    assert got.shape == ()
    np.testing.assert_allclose(got, want, rtol=1e-6)
