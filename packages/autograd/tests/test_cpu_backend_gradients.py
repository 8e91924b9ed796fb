"""The CPU backend on graphs with gradients: values, batch sizes, passes, updates.

Moved here from the tensor package's tests (which use no autograd): the generated
code's values against the kernels node by node, its batched weight-gradient product
and folded shape-only values, and compiled programs on a small MLP and its gradients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, Variable, compile, get_op, make_schedule
from asgrad.tensor.cpu import CPUExecutable
from asgrad.tensor.ir.schedule import Schedule


def _interpret(schedule: Schedule, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The reference: every node through its registered kernel, nothing specialised."""
    values: dict[int, Any] = {}
    for node in schedule.nodes:
        if node.op == "input":
            values[node.id] = feeds[node.name]
        elif node.op == "parameter":
            values[node.id] = node.attrs["variable"].value
        elif node.op == "constant":
            values[node.id] = node.attrs["value"]
        else:
            args = [values[n.id] for n in node.inputs]
            values[node.id] = get_op(node.op).kernel(*args, **node.attrs)
    return [
        np.asarray(values[n.id]) for n in [*schedule.outputs, *(n for _, n in schedule.updates)]
    ]


def _check(outputs: Sequence[Tensor], feeds_list: Sequence[dict[str, np.ndarray]]) -> None:
    schedule = make_schedule(outputs)
    exe = CPUExecutable(schedule)
    for feeds in feeds_list:
        expected = _interpret(schedule, feeds)
        got = exe.run(feeds)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert isinstance(g, np.ndarray)
            assert g.shape == e.shape
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _linear_model(batch: int, seq: int) -> tuple[list[Tensor], Graph]:
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (batch, seq, 6))
    w = g.parameter("w", variable=Variable("w", rng.standard_normal((6, 5)).astype(np.float32)))
    b = g.parameter("b", variable=Variable("b", rng.standard_normal((5,)).astype(np.float32)))
    h = (x @ w + b).relu()
    loss = (h * h).mean() + h.max(axis=-1).sum() * 0.1 + (h / 3.0).min(axis=(0, 1)).mean()
    gw, gb, gx = grad(loss, [w, b, x])
    return [loss, gw, gb, gx, h.reshape(-1, 5).transpose(), h.sum(axis=1, keepdims=True)], g


def test_batched_linear_and_its_gradients_match_the_kernels() -> None:
    outputs, _ = _linear_model(4, 3)
    rng = np.random.default_rng(1)
    _check(
        outputs,
        [
            {"x": rng.standard_normal((4, 3, 6)).astype(np.float32)},
            {"x": rng.standard_normal((9, 3, 6)).astype(np.float32)},
            {"x": rng.standard_normal((1, 3, 6)).astype(np.float32)},
        ],
    )


def test_a_batch_declared_one_may_grow() -> None:
    # Static types say the *_like ops are identities; fed 5 rows, they are not.
    outputs, _ = _linear_model(1, 1)
    rng = np.random.default_rng(2)
    _check(
        outputs,
        [
            {"x": rng.standard_normal((1, 1, 6)).astype(np.float32)},
            {"x": rng.standard_normal((5, 7, 6)).astype(np.float32)},
        ],
    )


def test_weight_gradient_of_a_batched_product_is_one_product() -> None:
    outputs, _ = _linear_model(4, 3)
    exe = CPUExecutable(make_schedule(outputs))
    exe.run({"x": np.ones((4, 3, 6), np.float32)})
    (fn,) = exe._fns.values()
    # the gradient rule folds the batch into the product: (12, 6).T @ (12, 5), no batch
    # of (6, 5) products to sum
    assert "_matmul_batch_sum(" not in fn.source
    assert ".reshape((12, 6))" in fn.source
    assert ".reshape((12, 5))" in fn.source
    assert fn.source.count("_matmul(") == 3  # forward, input gradient, weight gradient


def test_shape_only_values_fold_to_constants() -> None:
    g = Graph()
    x = g.input("x", (3, 4))
    (gx,) = grad((x * x).mean(), [x])
    exe = CPUExecutable(make_schedule([gx]))
    value = exe.run({"x": np.full((3, 4), 2.0, np.float32)})[0]
    np.testing.assert_allclose(value, np.full((3, 4), 2 * 2.0 / 12, np.float32), rtol=1e-6)
    (fn,) = exe._fns.values()
    for kernel_name in ("size_ratio", "broadcast_like"):
        assert kernel_name not in fn.source


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
