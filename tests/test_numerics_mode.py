"""Numerics checking stops at the first op making NaN or inf.

On both backends: ``evaluate``/``compile(check_numerics=True)``, the
``ASGRAD_CHECK_NUMERICS`` environment variable and ``Optimizer.compile(debug=True)``
name the op, its inputs' ranges and the source line; a failing training step writes
no variable.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.nn import SGD, Linear, mse_loss
from asgrad.tensor import Graph, NumericsError, compile, evaluate, where

BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "gpu":
        request.getfixturevalue("device")  # skips or fails without an adapter
    return str(request.param)


def _line_below() -> str:
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return f"{__file__}:{frame.f_back.f_lineno + 1}"


def test_log_of_a_negative_names_the_op_the_line_and_the_input_range(backend: str) -> None:
    g = Graph()
    x = g.input("x", (4,))
    shifted = x - 2.0
    where_ = _line_below()
    y = shifted.log()
    z = (y * 3.0).sum()
    feeds = {"x": np.array([3.0, 4.0, 1.0, 5.0], np.float32)}
    with np.errstate(invalid="ignore"):
        (unchecked,) = evaluate([z], feeds, backend=backend)
    assert np.isnan(unchecked)  # what the check is there to catch
    with pytest.raises(NumericsError) as info:
        evaluate([z], feeds, backend=backend, check_numerics=True)
    message = str(info.value)
    assert "log made at " + where_ in message
    assert "produced 1 NaN value(s) of 4" in message
    assert "finite values in [-1, 3]" in message


def test_a_division_by_zero_is_reported_as_infinite(backend: str) -> None:
    g = Graph()
    x, d = g.input("x", (3,)), g.input("d", (3,))
    where_ = _line_below()
    q = x / d
    feeds = {"x": np.ones(3, np.float32), "d": np.array([1.0, 0.0, 2.0], np.float32)}
    with pytest.raises(NumericsError, match="produced 1 infinite value") as info:
        evaluate([q.exp().sum()], feeds, backend=backend, check_numerics=True)
    assert "div made at " + where_ in str(info.value)


def test_a_propagated_infinity_is_not_an_error(backend: str) -> None:
    g = Graph()
    scores = g.input("scores", (2, 3))
    keep = g.input("keep", (2, 3), "bool")
    masked = where(keep, scores, g.constant(-np.inf))
    feeds = {
        "scores": np.arange(6, dtype=np.float32).reshape(2, 3),
        "keep": np.array([[True, False, True], [False, True, True]]),
    }
    (probs,) = evaluate([masked.softmax(axis=1)], feeds, backend=backend, check_numerics=True)
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)


def test_a_nan_fed_is_named(backend: str) -> None:
    g = Graph()
    x = g.input("x", (3,))
    feeds = {"x": np.array([1.0, np.nan, 2.0], np.float32)}
    with pytest.raises(NumericsError, match="input 'x' was fed 1 NaN value"):
        evaluate([x * 2.0], feeds, backend=backend, check_numerics=True)


def test_a_gradient_that_becomes_infinite_is_caught(backend: str) -> None:
    g = Graph()
    x = g.input("x", (2,))
    (dx,) = grad(x.sqrt().sum(), [x])
    with pytest.raises(NumericsError, match="infinite"):
        evaluate(
            [dx], {"x": np.array([0.0, 4.0], np.float32)}, backend=backend, check_numerics=True
        )


def _regression(seed: int, *, debug: bool | None, backend: str) -> tuple[Linear, object]:
    model = Linear(3, 1, rng=seed)
    g = Graph()
    x, y = g.input("x", (8, 3)), g.input("y", (8, 1))
    pred = model(x)
    loss = mse_loss(pred, y) + pred.abs().sqrt().mean() * 0.0
    step = SGD(model.parameters(), lr=0.1, momentum=0.9).compile(loss, backend=backend, debug=debug)
    return model, step


def _batch(i: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(i)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    return {"x": x, "y": (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)}


def test_a_debug_step_trains_exactly_like_a_plain_one(backend: str) -> None:
    plain, plain_step = _regression(0, debug=False, backend=backend)
    checked, checked_step = _regression(0, debug=True, backend=backend)
    for i in range(4):
        (a,) = plain_step(_batch(i))  # type: ignore[operator]
        (b,) = checked_step(_batch(i))  # type: ignore[operator]
        np.testing.assert_allclose(a, b, rtol=1e-6)
    for p, q in zip(plain.parameters(), checked.parameters(), strict=True):
        np.testing.assert_allclose(p.value, q.value, rtol=1e-6)


def test_a_failing_debug_step_names_the_op_and_updates_nothing(backend: str) -> None:
    model = Linear(2, 1, rng=0)
    g = Graph()
    x = g.input("x", (4, 2))
    where_ = _line_below()
    loss = model(x).log().mean()
    step = SGD(model.parameters(), lr=0.1).compile(loss, backend=backend, debug=True)
    before = [p.value.copy() for p in model.parameters()]
    feeds = {"x": np.array([[10, 10], [-10, -10], [5, -5], [-5, 5]], np.float32)}
    (preds,) = evaluate([model(Graph().input("x", (4, 2)))], feeds)
    assert (preds < 0).any()  # some prediction is negative: its log is NaN
    with pytest.raises(NumericsError, match="No variable was updated") as info:
        step(feeds)
    assert "log made at " + where_ in str(info.value)
    for old, p in zip(before, model.parameters(), strict=True):
        np.testing.assert_array_equal(p.value, old)


def test_the_environment_variable_turns_checking_on(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASGRAD_CHECK_NUMERICS", "1")
    g = Graph()
    x = g.input("x", (2,))
    program = compile([x.log()], backend=backend)
    with pytest.raises(NumericsError, match="log made at"):
        program(x=np.array([-1.0, 1.0], np.float32))
    assert compile([x.log()], backend=backend, check_numerics=False).check_numerics is False
