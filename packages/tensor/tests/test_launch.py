"""``Program.launch`` on a synchronous backend (the CPU): the same values, ready at once."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from asgrad.tensor import (
    DeviceValue,
    FeedError,
    Graph,
    NumericsError,
    Program,
    Variable,
    compile,
    read_all,
)


def _program(check_numerics: bool = False) -> tuple[Variable, Program]:
    g = Graph("launch")
    w = Variable("w", np.array([1.0, 2.0], np.float32))
    x = g.input("x", (2,))
    wt = g.parameter("w", variable=w)
    loss = ((wt * x).log()).sum()
    program = compile([loss, wt * 2.0], [(w, wt - 0.1 * x)], check_numerics=check_numerics)
    return w, program


def test_launch_gives_the_values_of_a_call_and_applies_updates() -> None:
    w_call, call = _program()
    w_launch, launch = _program()
    x = np.array([1.0, 1.0], np.float32)
    for _ in range(3):
        expected = call(x=x)
        got = launch.launch(x=x)
        assert all(isinstance(v, DeviceValue) and v.is_ready() for v in got)
        for want, value in zip(expected, got, strict=True):
            np.testing.assert_array_equal(np.asarray(value), want)
            assert value.shape == want.shape
            assert value.dtype == want.dtype
    np.testing.assert_array_equal(w_launch.value, w_call.value)


def test_a_value_reads_like_an_array_and_a_scalar() -> None:
    _, program = _program()
    loss, doubled = program.launch({"x": np.array([1.0, 1.0], np.float32)})
    assert float(loss) == pytest.approx(np.log(2.0))
    assert loss.item() == pytest.approx(np.log(2.0))
    assert int(loss) == 0
    assert bool(loss)
    assert doubled[1] == 4.0
    assert f"{loss:.3f}" == "0.693"
    assert loss.ndim == 0
    assert loss.size == 1
    assert doubled.ndim == 1
    assert len(doubled) == 2
    assert np.asarray(doubled, dtype=np.float64).dtype == np.float64
    assert doubled.numpy() is doubled.numpy()  # read once, then held
    assert np.mean(read_all([loss, loss])) == pytest.approx(np.log(2.0))
    assert repr(doubled) == "DeviceValue(array([2., 4.], dtype=float32))"
    assert loss.block_until_ready() is loss
    with pytest.raises(TypeError, match="0-d"):
        len(loss)


def test_a_value_computes_like_an_array_and_pickles_as_its_value() -> None:
    _, program = _program()
    loss, doubled = program.launch(x=np.array([1.0, 1.0], np.float32))
    assert loss * 2 == pytest.approx(2 * np.log(2.0))
    assert 1.0 + loss == pytest.approx(1 + np.log(2.0))
    assert loss < 1.0
    np.testing.assert_array_equal(doubled - doubled, [0.0, 0.0])
    assert np.sum(doubled) == 6.0
    total = 0.0
    total += loss * 3
    assert total == pytest.approx(3 * np.log(2.0))
    restored = pickle.loads(pickle.dumps([loss, doubled]))
    assert restored[0].is_ready()
    np.testing.assert_array_equal(restored[1].numpy(), doubled.numpy())


def test_launch_checks_feeds_like_a_call() -> None:
    _, program = _program()
    with pytest.raises(FeedError, match="fed both"):
        program.launch({"x": np.ones(2, np.float32)}, x=np.ones(2, np.float32))
    with pytest.raises(FeedError, match="was not fed"):
        program.launch()


def test_check_numerics_raises_at_the_launch_and_updates_nothing() -> None:
    w, program = _program(check_numerics=True)
    with pytest.raises(NumericsError, match="log"):
        program.launch(x=np.array([-1.0, 1.0], np.float32))
    np.testing.assert_array_equal(w.value, [1.0, 2.0])
