"""grad(): broadcasting reductions, repeated uses, errors, and the stable entry point."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asgrad.autograd import GradientCheckError, grad, gradient_check
from asgrad.tensor import (
    Graph,
    GraphError,
    NotDifferentiableError,
    ShapeError,
    Tensor,
    evaluate,
)


def _reduce_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back to ``shape`` (the reference, written out)."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    axes = tuple(i for i, d in enumerate(shape) if d == 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


@st.composite
def broadcastable_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    out = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))

    def operand() -> tuple[int, ...]:
        keep = draw(st.integers(0, len(out)))
        return tuple(1 if draw(st.booleans()) else d for d in out[len(out) - keep :])

    return operand(), operand()


@settings(max_examples=60, deadline=None)
@given(broadcastable_pair(), st.sampled_from(["add", "mul", "sub", "div"]))
def test_broadcast_gradients_are_reduced_to_operand_shapes(
    shapes: tuple[tuple[int, ...], tuple[int, ...]], op: str
) -> None:
    sa, sb = shapes
    rng = np.random.default_rng(math.prod(sa) + 7 * math.prod(sb))
    A = rng.standard_normal(sa)
    B = rng.uniform(0.5, 2.0, sb)
    g = Graph()
    a, b = g.input("a", sa, "float64"), g.input("b", sb, "float64")
    out = {"add": a + b, "mul": a * b, "sub": a - b, "div": a / b}[op]
    S = rng.standard_normal(out.shape)
    s = g.input("s", out.shape, "float64")
    da, db = grad((out * s).sum(), [a, b])
    assert da.shape == sa
    assert db.shape == sb
    got_a, got_b = evaluate([da, db], {"a": A, "b": B, "s": S})
    Ab, Bb = np.broadcast_arrays(A, B)
    locals_a: dict[str, float | np.ndarray] = {"add": 1.0, "mul": Bb, "sub": 1.0, "div": 1.0 / Bb}
    locals_b: dict[str, float | np.ndarray] = {
        "add": 1.0,
        "mul": Ab,
        "sub": -1.0,
        "div": -Ab / Bb**2,
    }
    local_a, local_b = locals_a[op], locals_b[op]
    np.testing.assert_allclose(got_a, _reduce_to(S * local_a, sa), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_b, _reduce_to(S * local_b, sb), rtol=1e-12, atol=1e-12)


def test_contributions_are_summed_over_uses() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    y = (x * x + x.sin() * x + x).sum()
    (dx,) = grad(y, [x])
    X = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(
        evaluate([dx], {"x": X})[0], 2 * X + np.cos(X) * X + np.sin(X) + 1.0, rtol=1e-12
    )


def test_gradient_of_an_unconnected_value_is_zeros() -> None:
    g = Graph()
    x, z = g.input("x", (3,), "float64"), g.input("z", (2, 2), "float64")
    (dz,) = grad(x.sum(), [z])
    assert dz.shape == (2, 2)
    value = evaluate([dz], {"x": np.ones(3), "z": np.ones((2, 2))})[0]
    np.testing.assert_array_equal(value, np.zeros((2, 2)))


def test_integer_paths_carry_no_gradient() -> None:
    g = Graph()
    x = g.input("x", (4,), "float64")
    mask = (x > 0).cast("float64")  # piecewise constant: zero gradient
    (dx,) = grad((x * mask).sum(), [x])
    X = np.array([-1.0, 2.0, 0.5, -3.0])
    np.testing.assert_array_equal(evaluate([dx], {"x": X})[0], (X > 0).astype(float))


def test_seed_gives_vector_jacobian_products() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    v = g.input("v", (3,), "float64")
    (vjp,) = grad(x.exp(), [x], seed=v)
    X, V = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(evaluate([vjp], {"x": X, "v": V})[0], V * np.exp(X))


def test_gradient_through_cast() -> None:
    _ = gradient_check(
        lambda x: (x.cast("float32") * 3.0).cast("float64"),
        [np.linspace(-1, 1, 4)],
        eps=1e-2,
        rtol=1e-5,
        atol=1e-5,
    )


def test_gradient_check_catches_a_wrong_rule() -> None:
    with pytest.raises(GradientCheckError, match="gradient of input 0"):
        gradient_check(lambda x: x.relu() * 2.0, [np.array([-0.0001, 0.0001])], eps=1e-3)


# -- errors -------------------------------------------------------------------------------------
def test_grad_with_respect_to_an_int_input_is_an_error() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    i = g.input("i", (3,), "int64")
    y = (x * i.cast("float64")).sum()
    with pytest.raises(NotDifferentiableError, match="i is int64; only float values"):
        grad(y, [i])


def test_grad_of_an_int_value_is_an_error() -> None:
    i = Graph().input("i", (3,), "int64")
    with pytest.raises(NotDifferentiableError, match="cannot differentiate int64"):
        grad(i.sum(), [i])


def test_grad_of_a_non_scalar_needs_a_seed() -> None:
    x = Graph().input("x", (3,), "float64")
    with pytest.raises(ShapeError, match="non-scalar"):
        grad(x.exp(), [x])


def test_grad_across_graphs_is_an_error() -> None:
    x = Graph("one").input("x", (3,), "float64")
    z = Graph("two").input("z", (3,), "float64")
    with pytest.raises(GraphError, match="z belongs to another graph"):
        grad(x.sum(), [z])


# -- the entry point held stable: this example keeps working as written --------------------------
def test_entry_point_example_verbatim() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 4)).astype(np.float32)
    W = rng.standard_normal((4, 5)).astype(np.float32)

    from asgrad.autograd import grad
    from asgrad.tensor import Graph, evaluate

    g = Graph()
    x = g.input("x", (3, 4))
    w = g.input("w", (4, 5))
    y = (x @ w).tanh().sum()
    (dw,) = grad(y, [w])
    y_val, dw_val = evaluate([y, dw], {"x": X, "w": W})

    assert type(y) is Tensor
    assert y.dtype == "float32"
    assert x.dtype == "float32"
    X64, W64 = X.astype(np.float64), W.astype(np.float64)
    assert y_val.dtype == np.float32
    assert dw_val.dtype == np.float32
    assert float(y_val) == pytest.approx(float(np.tanh(X64 @ W64).sum()), rel=1e-5)
    expected_dw = X64.T @ (1.0 - np.tanh(X64 @ W64) ** 2)
    np.testing.assert_allclose(dw_val, expected_dw, rtol=1e-5, atol=1e-6)


def test_entry_point_module_functions() -> None:
    from asgrad.tensor import concat, maximum, minimum, where

    g = Graph()
    a, b = g.input("a", (2,), "float64"), g.input("b", (2,), "float64")
    outs = [where(a > b, a, b), maximum(a, b), minimum(a, 0.0), concat([a, b])]
    A, B = np.array([1.0, -2.0]), np.array([0.0, 3.0])
    got = evaluate(outs, {"a": A, "b": B})
    np.testing.assert_array_equal(got[0], np.where(A > B, A, B))
    np.testing.assert_array_equal(got[1], np.maximum(A, B))
    np.testing.assert_array_equal(got[2], np.minimum(A, 0.0))
    np.testing.assert_array_equal(got[3], np.concatenate([A, B]))


def test_grad_of_or_with_respect_to_a_non_tensor_is_a_typed_error() -> None:
    from asgrad.tensor import ArgumentTypeError

    g = Graph()
    x = g.input("x", (2,), "float64")
    with pytest.raises(ArgumentTypeError, match="grad: wrt: item 0 must be a Tensor"):
        grad((x * x).sum(), [np.ones(2)])  # type: ignore[list-item]
    with pytest.raises(ArgumentTypeError, match="grad: y must be a Tensor"):
        grad(np.ones(()), [x])  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["cummax", "cummin", "sort"])
def test_scan_and_sort_gradients_over_an_empty_axis_are_empty(op: str) -> None:
    g = Graph()
    x = g.input("x", (2, 0))
    y = getattr(x, op)(1)
    y = y[0] if isinstance(y, tuple) else y
    (dx,) = grad(y.sum(), [x])
    (got,) = evaluate([dx], {"x": np.zeros((2, 0), np.float32)})
    assert got.shape == (2, 0)
