"""What a PyTorch user reaches for first."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn.errors import StateMismatchError
from asgrad.tensor import ArgumentError, ArgumentTypeError, Graph


def _regression() -> tuple[nn.Linear, object, dict[str, np.ndarray]]:
    model = nn.Linear(3, 1, rng=0)
    g = Graph()
    x, y = g.input("x", (4, 3)), g.input("y", (4, 1))
    feeds = {
        "x": np.arange(12, dtype=np.float32).reshape(4, 3) / 10,
        "y": np.ones((4, 1), np.float32),
    }
    return model, nn.mse_loss(model(x), y), feeds


def test_a_second_optimizer_compiles_on_the_same_graph() -> None:
    model, loss, feeds = _regression()
    first = nn.Adam(model.parameters(), lr=1e-2).compile(loss)  # type: ignore[arg-type]
    second = nn.Adam(model.parameters(), lr=1e-2).compile(loss)  # type: ignore[arg-type]
    third = nn.SGD(model.parameters(), lr=1e-2).compile(loss)  # type: ignore[arg-type]
    losses = [float(step(feeds)[0]) for step in (first, second, third)]  # type: ignore[operator]
    assert losses[0] > losses[1] > losses[2]  # each step trained the one model further


def test_the_same_optimizer_compiles_twice() -> None:
    model, loss, feeds = _regression()
    opt = nn.SGD(model.parameters(), lr=1e-2)
    a, b = opt.compile(loss), opt.compile(loss)  # type: ignore[arg-type]
    a(feeds)  # type: ignore[operator]
    b(feeds)  # type: ignore[operator]
    assert int(opt.step_count.value) == 2


def test_a_parameter_from_an_array_as_in_pytorch() -> None:
    p = nn.Parameter(np.arange(3.0))
    assert p.value.dtype == np.float32
    np.testing.assert_array_equal(p.value, [0.0, 1.0, 2.0])
    p.value = np.full(3, 7.0, np.float32)
    p.reset()
    np.testing.assert_array_equal(p.value, [0.0, 1.0, 2.0])
    assert nn.Parameter(np.ones((2, 2)), dtype="float64").value.dtype == np.float64


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (((3,),), r"give an initializer, e\.g\. Parameter\(shape, init\.zeros\)"),
        ((np.ones(3), nn.init.zeros), "not both"),
    ],
)
def test_a_parameter_needs_an_initializer_or_an_array(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        nn.Parameter(*args)  # type: ignore[arg-type]


def test_load_state_dict_casts_float64_when_no_value_changes() -> None:
    model = nn.Linear(2, 2, rng=0)
    state = {k: v.astype(np.float64) * 2 for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    for k, v in model.state_dict().items():
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v, state[k])


def test_load_state_dict_refuses_a_cast_that_changes_values_and_says_it_is_the_dtype() -> None:
    model = nn.Linear(2, 2, rng=0)
    before = {k: v.copy() for k, v in model.state_dict().items()}
    state = {k: v.astype(np.float64) + 1e-12 for k, v in before.items()}
    with pytest.raises(StateMismatchError, match="holds float32, the state float64") as info:
        model.load_state_dict(state)
    assert "architecture" not in str(info.value)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_a_numpy_array_given_to_a_layer_says_what_to_do_at_the_users_line() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with pytest.raises(ArgumentTypeError, match=r"Sequential expects a symbolic Tensor") as info:
        model(np.ones((2, 3), np.float32))
    assert "got numpy.ndarray" in str(info.value)
    assert __file__ in str(info.value)
