"""LBFGS: torch.optim.LBFGS's iterates on a small tanh network, closure API, state, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import LBFGS, SGD, Linear, Sequential, Tanh, mse_loss
from asgrad.nn.optim.line_search import cubic_interpolate
from asgrad.tensor import ArgumentError, ArgumentTypeError, Graph, GraphError, Program

N, IN, HIDDEN = 16, 3, 5


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((N, IN))
    return x, np.sin(x @ rng.standard_normal((IN, 1)))


def _model() -> Sequential:
    return Sequential(
        Linear(IN, HIDDEN, dtype="float64", rng=0),
        Tanh(),
        Linear(HIDDEN, 1, dtype="float64", rng=1),
    )


def _program(model: Sequential, opt: LBFGS) -> Program:
    g = Graph()
    x, y = g.input("x", (N, IN), "float64"), g.input("y", (N, 1), "float64")
    return opt.compile(mse_loss(model(x), y))


CONFIGS: list[dict[str, Any]] = [
    {},
    {"line_search_fn": "strong_wolfe"},
    {"lr": 0.5, "max_iter": 7, "history_size": 3},
    {"max_iter": 10, "history_size": 2, "line_search_fn": "strong_wolfe"},
    {"max_iter": 30, "max_eval": 12, "tolerance_change": 1e-6, "line_search_fn": "strong_wolfe"},
]


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_matches_torch_lbfgs(kwargs: dict[str, Any], torch_reference: Callable[..., Any]) -> None:
    x, y = _data()
    model = _model()
    params = model.parameters()

    def run(torch: Any, x: Any, y: Any, initial: list[Any]) -> Any:
        theirs = [torch.tensor(p, requires_grad=True) for p in initial]
        topt = torch.optim.LBFGS(theirs, **kwargs)
        xt, yt = torch.tensor(x), torch.tensor(y)

        def closure() -> Any:
            topt.zero_grad()
            w1, b1, w2, b2 = theirs  # asgrad's Linear weight is (in, out)
            loss = ((torch.tanh(xt @ w1 + b1) @ w2 + b2 - yt) ** 2).mean()
            loss.backward()
            return loss.detach()

        steps = []
        for _ in range(3):
            loss = float(topt.step(closure))
            steps.append((loss, [t.detach().clone() for t in theirs]))
        state = topt.state[theirs[0]]
        return steps, int(state["func_evals"]), int(state["n_iter"])

    steps, func_evals, n_iter = torch_reference(run, x, y, [p.value.copy() for p in params])
    opt = LBFGS(params, **kwargs)
    evaluate = _program(model, opt)
    for their_loss, their_params in steps:
        ours_loss = opt.step(lambda: evaluate(x=x, y=y))
        assert ours_loss == pytest.approx(their_loss, rel=1e-9)
        for p, t in zip(params, their_params, strict=True):
            np.testing.assert_allclose(p.value, t, rtol=1e-7, atol=1e-10)
    assert opt.lbfgs_state["func_evals"] == func_evals
    assert opt.lbfgs_state["n_iter"] == n_iter


def test_fits_better_than_many_sgd_steps() -> None:
    x, y = _data()
    model = _model()
    opt = LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    evaluate = _program(model, opt)
    start = float(evaluate(x=x, y=y)[0])
    for _ in range(5):
        opt.step(lambda: evaluate(x=x, y=y))
    lbfgs_loss = float(evaluate(x=x, y=y)[0])
    sgd_model = _model()
    g = Graph()
    xi, yi = g.input("x", (N, IN), "float64"), g.input("y", (N, 1), "float64")
    sgd = SGD(sgd_model.parameters(), lr=0.1).compile(mse_loss(sgd_model(xi), yi))
    sgd_loss = [float(sgd(x=x, y=y)[0]) for _ in range(100)][-1]
    assert lbfgs_loss < 0.5 * sgd_loss < start


def test_state_dict_resumes_identically() -> None:
    x, y = _data()
    model, twin = _model(), _model()
    opt = LBFGS(model.parameters(), max_iter=4, history_size=3)
    evaluate = _program(model, opt)
    opt.step(lambda: evaluate(x=x, y=y))
    twin.load_state_dict(model.state_dict())
    twin_opt = LBFGS(twin.parameters(), max_iter=4, history_size=3)
    twin_eval = _program(twin, twin_opt)
    twin_opt.load_state_dict(opt.state_dict())
    for _ in range(2):
        assert opt.step(lambda: evaluate(x=x, y=y)) == twin_opt.step(lambda: twin_eval(x=x, y=y))
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        np.testing.assert_array_equal(a.value, b.value)


def test_stops_at_once_at_a_minimum() -> None:
    g = Graph()
    model = Linear(1, 1, dtype="float64", rng=0, bias=False)
    x = g.input("x", (1, 1), "float64")
    opt = LBFGS(model.parameters())
    evaluate = opt.compile((model(x) * 0.0).sum())
    weight = model.parameters()[0].value.copy()
    opt.step(lambda: evaluate(x=np.ones((1, 1))))
    np.testing.assert_array_equal(model.parameters()[0].value, weight)
    assert opt.lbfgs_state["func_evals"] == 1


def test_cubic_interpolation_finds_the_minimum_of_a_cubic() -> None:
    # f(t) = (t - 1)**2 on [0, 3]: f(0) = 1, f'(0) = -2, f(3) = 4, f'(3) = 4
    assert cubic_interpolate(0.0, 1.0, -2.0, 3.0, 4.0, 4.0) == pytest.approx(1.0)
    assert cubic_interpolate(0.0, 1.0, -2.0, 3.0, 4.0, 4.0, bounds=(1.5, 2.0)) == 1.5


def test_errors() -> None:
    model = _model()
    with pytest.raises(ArgumentError, match="line_search_fn"):
        LBFGS(model.parameters(), line_search_fn="backtracking")
    with pytest.raises(ArgumentError, match="history_size"):
        LBFGS(model.parameters(), history_size=0)
    opt = LBFGS(model.parameters())
    with pytest.raises(ArgumentTypeError, match="closure"):
        opt.step(lambda: 1.0)  # type: ignore[arg-type,return-value]  # the error under test
    with pytest.raises(ArgumentTypeError, match="closure"):
        opt.step(None)  # type: ignore[arg-type]  # the error under test
    with pytest.raises(GraphError, match="none of the optimizer's parameters"):
        opt.compile(Graph().input("z", (2,), "float64").sum())
