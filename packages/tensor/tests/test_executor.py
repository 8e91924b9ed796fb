"""The executor: batch-size independence, freeing, variable updates, the passes toggle."""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import asgrad.tensor.cpu_backend as executor_module
from asgrad.autograd import grad
from asgrad.tensor import (
    Graph,
    OpDef,
    Variable,
    compile,
    evaluate,
    get_op,
    make_schedule,
)


def _mlp_graph() -> tuple[Graph, Variable, Variable, list[Any]]:
    rng = np.random.default_rng(0)
    W = Variable("W", rng.standard_normal((4, 5)))
    b = Variable("b", rng.standard_normal((5,)))
    g = Graph()
    x = g.input("x", (3, 4), "float64")
    w, bias = g.parameter("W", variable=W), g.parameter("b", variable=b)
    h = (x @ w + bias).tanh()
    loss = (h * h).mean() + h.var(axis=0).sum() + h.max(axis=1).mean()
    dw, db, dx = grad(loss, [w, bias, x])
    return g, W, b, [loss, dw, db, dx]


def _mlp_reference(X: np.ndarray, W: np.ndarray, b: np.ndarray) -> float:
    h = np.tanh(X @ W + b)
    return float((h * h).mean() + h.var(axis=0).sum() + h.max(axis=1).mean())


@pytest.mark.parametrize("optimize_graph", [True, False])
def test_one_graph_runs_on_two_batch_sizes(optimize_graph: bool) -> None:
    g, W, b, outputs = _mlp_graph()
    nodes_before = len(g)
    program = compile(outputs, optimize_graph=optimize_graph)
    rng = np.random.default_rng(1)
    for batch in (3, 7, 3):
        X = rng.standard_normal((batch, 4))
        loss, dw, db, dx = program({"x": X})
        assert loss == pytest.approx(_mlp_reference(X, W.value, b.value), rel=1e-12)
        assert dw.shape == (4, 5)
        assert db.shape == (5,)
        assert dx.shape == (batch, 4)
        # Central differences on a few entries of W.
        eps = 1e-6
        for i, j in ((0, 0), (3, 4), (1, 2)):
            Wp, Wm = W.value.copy(), W.value.copy()
            Wp[i, j] += eps
            Wm[i, j] -= eps
            numeric = (_mlp_reference(X, Wp, b.value) - _mlp_reference(X, Wm, b.value)) / (2 * eps)
            assert dw[i, j] == pytest.approx(numeric, rel=1e-5, abs=1e-8)
    assert len(g) == nodes_before  # nothing was rebuilt


def test_parameter_gradient_keeps_its_shape_when_a_declared_1_grows() -> None:
    # A positional-embedding pattern: batch declared as 1, fed as 7. The gradient of
    # the (1, 4) parameter must be summed over the batch, whatever was declared.
    g = Graph()
    x = g.input("x", (1, 4), "float64")
    p = g.parameter("p", (1, 4), "float64")
    loss = ((x + p) * x).sum()
    (dp,) = grad(loss, [p])
    X = np.arange(28, dtype=np.float64).reshape(7, 4)
    for optimize_graph in (True, False):
        (value,) = compile([dp], optimize_graph=optimize_graph)({"x": X})
        assert value.shape == (1, 4)
        np.testing.assert_allclose(value, X.sum(axis=0, keepdims=True))


def test_outputs_equal_without_the_passes() -> None:
    _, _, _, outputs = _mlp_graph()
    X = np.random.default_rng(2).standard_normal((5, 4))
    fast = compile(outputs)({"x": X})
    plain = compile(outputs, optimize_graph=False)({"x": X})
    for a, b in zip(fast, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_last_use_is_the_last_user() -> None:
    _, _, _, outputs = _mlp_graph()
    schedule = make_schedule(outputs)
    position = {n.id: i for i, n in enumerate(schedule.nodes)}
    end = len(schedule.nodes)
    out_ids = {n.id for n in schedule.outputs}
    for i, node in enumerate(schedule.nodes):
        users = [j for j, user in enumerate(schedule.nodes) if node in user.inputs]
        if node.id in out_ids:
            assert schedule.last_use[node.id] == end
        else:
            assert users, f"{node} is computed but never used"
            assert schedule.last_use[node.id] == max(users)
            assert max(users) > i
        assert all(position[inp.id] < i for inp in node.inputs)  # topological


def test_intermediates_are_freed_after_their_last_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap every kernel so that each step checks which earlier results are still alive."""
    g = Graph()
    x = g.input("x", (64,), "float64")
    a = x.exp()
    b = a.sin()
    c = b.cos() * a  # a is used again here, so it lives until this step
    d = c.tanh()
    out = (d * d).sum()
    schedule = make_schedule([out])
    step_of = {n.id: i for i, n in enumerate(schedule.nodes)}
    results: list[tuple[int, weakref.ref[np.ndarray]]] = []
    violations: list[str] = []
    real_get_op = get_op
    # The executor asks for each node's op in schedule order: hand out the steps so.
    steps = {
        name: iter([step_of[n.id] for n in schedule.nodes if n.op == name])
        for name in {n.op for n in schedule.nodes}
    }

    def checking_get_op(name: str) -> OpDef:
        op = real_get_op(name)
        calls = steps[name]

        def kernel(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
            step = next(calls)
            for made_at, ref in results:
                node = schedule.nodes[made_at]
                if ref() is not None and schedule.last_use[node.id] < step:
                    violations.append(f"{node.name} alive at step {step}")
            value = np.asarray(op.kernel(*arrays, **attrs))
            results.append((step, weakref.ref(value)))
            return value

        return replace(op, kernel=kernel)

    monkeypatch.setattr(executor_module, "get_op", checking_get_op)
    program = compile([out])
    X = np.linspace(-1, 1, 64)
    (value,) = program({"x": X})
    assert value == pytest.approx(
        float((np.tanh(np.cos(np.sin(np.exp(X))) * np.exp(X)) ** 2).sum())
    )
    assert [schedule.nodes[made].op for made, _ in results] == [
        "exp",
        "sin",
        "cos",
        "mul",
        "tanh",
        "mul",
        "sum",
    ]
    assert not violations, violations
    # Every intermediate is gone once the run is over; only the output survives.
    assert [made for made, ref in results if ref() is not None] == [len(schedule.nodes) - 1]


def test_variable_updates_apply_after_each_run() -> None:
    w = Variable("w", np.array([1.0, -2.0, 3.0]))
    g = Graph()
    x = g.input("x", (3,), "float64")
    param = g.parameter("w", variable=w)
    loss = ((param * x) ** 2.0).sum()
    (dw,) = grad(loss, [param])
    step = compile([loss], updates={w: param - 0.1 * dw})
    X = np.array([0.5, 1.0, -1.0])
    expected_w = w.value.copy()
    for _ in range(3):
        (value,) = step({"x": X})
        assert value == pytest.approx(float(((expected_w * X) ** 2).sum()))
        expected_w = expected_w - 0.1 * 2 * expected_w * X**2
        np.testing.assert_allclose(w.value, expected_w)


def test_update_with_wrong_shape_is_rejected() -> None:
    w = Variable("w", np.zeros((3,)))
    g = Graph()
    param = g.parameter("w", variable=w)
    with pytest.raises(Exception, match="update of 'w'"):
        make_schedule([], updates={w: param.sum()})


def test_evaluate_caches_programs_per_graph() -> None:
    g = Graph()
    x = g.input("x", (2,))
    y = x * 2.0
    evaluate([y], {"x": np.ones(2, np.float32)})
    evaluate([y], {"x": np.ones(5, np.float32)})
    assert len(g.programs) == 1
    (single,) = evaluate(y, {"x": np.array([1.0, 2.0], np.float32)})
    assert single.tolist() == [2.0, 4.0]
    assert single.dtype == np.float32


def test_feeds_are_converted_to_the_declared_dtype() -> None:
    g = Graph()
    x = g.input("x", (2,))
    (value,) = evaluate([x + 1.0], {"x": np.array([1, 2])})
    assert value.dtype == np.float32
    assert value.tolist() == [2.0, 3.0]


def test_flatten_does_not_bake_in_the_batch_size() -> None:
    g = Graph()
    x = g.input("x", (3, 2, 5), "float64")
    flat, tail = x.flatten(1), x.flatten(2)
    program = compile([flat, tail])
    for batch in (3, 7):
        X = np.arange(batch * 10, dtype=np.float64).reshape(batch, 2, 5)
        got_flat, got_tail = program({"x": X})
        np.testing.assert_array_equal(got_flat, X.reshape(batch, 10))
        np.testing.assert_array_equal(got_tail, X)
    assert x.flatten().shape == (30,)
