"""Row programs (`asgrad.tensor.ir.rows`): the one meaning of softmax, log-softmax and
the norms, rendered for numpy (here) and Numba (the compiled path's tests).

The references below are independent numpy formulas, the oracles the rendered
kernels are checked against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.tensor import get_op
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.rows import RowBuilder, numpy_rows
from asgrad.tensor.ir.scalar import exp

Array = np.ndarray


def _softmax(x: Array, axis: int) -> Array:
    e = np.exp(x - x.max(axis, keepdims=True))
    out: Array = e / e.sum(axis, keepdims=True)
    return out


def _moments(x: Array, axes: tuple[int, ...], eps: float) -> tuple[Array, Array]:
    mean = x.mean(axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), 1.0 / np.sqrt(var + eps)


def _norm_backward(g: Array, x: Array, axes: tuple[int, ...], eps: float) -> Array:
    x_hat, rstd = _moments(x, axes, eps)
    out: Array = rstd * (
        g - g.mean(axes, keepdims=True) - x_hat * (g * x_hat).mean(axes, keepdims=True)
    )
    return out


def _rng() -> np.random.Generator:
    return np.random.default_rng(11)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_and_log_softmax_match_the_formula(axis: int) -> None:
    x = _rng().standard_normal((3, 4, 5)) * 5
    np.testing.assert_allclose(get_op("softmax").kernel(x, axis=axis), _softmax(x, axis))
    np.testing.assert_allclose(
        get_op("log_softmax").kernel(x, axis=axis), np.log(_softmax(x, axis)), atol=1e-12
    )


@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_and_its_gradient_match_the_formula(affine: bool) -> None:
    rng = _rng()
    x, g = rng.standard_normal((2, 3, 4, 5)) * 3 + 1, rng.standard_normal((2, 3, 4, 5))
    w, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    attrs: dict[str, Any] = {"normalized_shape": (4, 5), "eps": 1e-3}
    x_hat, _ = _moments(x, (2, 3), 1e-3)
    got = get_op("layer_norm").kernel(x, *((w, b) if affine else ()), **attrs)
    np.testing.assert_allclose(got, x_hat * w + b if affine else x_hat, atol=1e-12)
    got = get_op("layer_norm_backward").kernel(g, x, *((w,) if affine else ()), **attrs)
    want = _norm_backward(g * w if affine else g, x, (2, 3), 1e-3)
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 2)])
def test_batch_norm_and_its_gradient_match_the_formula(shape: tuple[int, ...]) -> None:
    rng = _rng()
    x, g = rng.standard_normal(shape) * 2 + 1, rng.standard_normal(shape)
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    axes = (0, *range(2, len(shape)))
    channel = (1, 3) + (1,) * (len(shape) - 2)
    x_hat, _ = _moments(x, axes, 1e-5)
    got = get_op("batch_norm").kernel(x, w, b, eps=1e-5)
    np.testing.assert_allclose(got, x_hat * w.reshape(channel) + b.reshape(channel), atol=1e-12)
    got = get_op("batch_norm_backward").kernel(g, x, w, eps=1e-5)
    want = _norm_backward(g * w.reshape(channel), x, axes, 1e-5)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_a_nan_makes_its_softmax_row_nan_and_leaves_the_others() -> None:
    x = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]], np.float32)
    with np.errstate(invalid="ignore"):
        got = get_op("softmax").kernel(x, axis=1)
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], _softmax(x[1:], 1)[0], rtol=1e-6)


def test_softmax_needs_one_temporary_and_writes_into_its_input() -> None:
    p = RowBuilder(("element",), axes=(1,))
    x = p.input(0)
    m = p.reduce("max", x)
    s = p.reduce("sum", exp(x - m))
    fn = numpy_rows(p.program(exp(x - m) / s), "float32")
    assert fn.plan.slots == 1  # type: ignore[attr-defined]  # the plan, shown to a reader
    a = _rng().standard_normal((4, 7)).astype(np.float32)
    want = _softmax(a.astype(np.float64), 1)
    got = fn(a, out=a)
    assert got is a
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_independent_reductions_share_a_pass_over_the_row() -> None:
    rows = get_op("layer_norm_backward").rows
    assert rows is not None
    program = rows(2, 3, normalized_shape=(8,), eps=1e-5)
    # mean(x); then the variance and mean(g * w) at once; then mean(g * w * x_hat)
    assert program.groups() == [[0], [1, 2], [3]]


def test_a_reduction_must_read_the_row() -> None:
    p = RowBuilder(("element", "position"), axes=(1,))
    with pytest.raises(ArgumentError, match="reads an element of the row"):
        p.reduce("sum", p.input(1) * 2.0)
    with pytest.raises(ArgumentError, match="one of"):
        p.reduce("median", p.input(0))


@pytest.mark.parametrize("name", ["log_softmax", "layer_norm_backward"])
def test_a_fresh_result_never_lands_in_a_scratch_array(name: str) -> None:
    op = get_op(name)
    assert op.into is not None
    rng = _rng()
    xs = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(op.into.leading)]
    attrs: dict[str, Any] = {"axis": 1} if name == "log_softmax" else {}
    attrs = op.normalize_attrs(attrs if name == "log_softmax" else {"normalized_shape": (8,)})
    work = tuple(np.empty_like(xs[0]) for _ in range(op.into.work))
    got = op.into.fn(*xs, out=None, work=work, **attrs)
    assert not any(np.shares_memory(got, w) for w in work)
    assert np.array_equal(got, op.kernel(*xs, **attrs))
