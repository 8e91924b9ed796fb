"""train()/eval() switch a graph already built (a mode variable read at run)."""

from __future__ import annotations

import numpy as np
import pytest

import asgrad.nn as nn
from asgrad.tensor import Graph, evaluate, get_backend

BACKENDS = ["cpu", "gpu"]


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(6, 8, rng=0),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.Dropout(0.5, seed=3),
        nn.Linear(8, 2, rng=1),
    )


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(16, 6)).astype("float32"), rng.normal(size=(16, 2)).astype("float32")


def _run(out: object, X: np.ndarray, backend: str = "cpu") -> np.ndarray:
    return evaluate(out, {"x": X}, backend=backend)[0]  # type: ignore[arg-type]


def _backend(name: str) -> str:
    if name == "gpu":
        try:
            get_backend("gpu")
        except Exception as exc:  # pragma: no cover - machines without a GPU adapter
            import os

            if os.environ.get("ASGRAD_REQUIRE_GPU") == "1":
                raise
            pytest.skip(f"no GPU backend: {exc}")
    return name


@pytest.mark.parametrize("backend", BACKENDS)
def test_eval_switches_a_graph_built_in_training_mode(backend: str) -> None:
    backend = _backend(backend)
    X, Y = _data()
    model = _model()
    g = Graph()
    x, y = g.input("x", (16, 6)), g.input("y", (16, 2))
    pred = model(x)
    step = nn.SGD(model.parameters(), lr=0.1).compile(nn.mse_loss(pred, y), backend=backend)
    step(x=X, y=Y)
    bn = model[1]
    assert int(bn.num_batches_tracked.value) == 1

    model.eval()
    # The SAME graph's prediction equals a graph traced fresh in eval mode...
    g2 = Graph()
    fresh = model(g2.input("x", (16, 6)))
    same = _run(pred, X, backend)
    want = _run(fresh, X, backend)
    np.testing.assert_allclose(same, want, rtol=1e-5, atol=1e-5)
    # ...is deterministic (no dropout mask) and a step in eval mode leaves the
    # running statistics and the batch counter alone.
    np.testing.assert_array_equal(same, _run(pred, X, backend))
    stats = {k: v.copy() for k, v in model.state_dict().items() if "running" in k}
    step(x=X, y=Y)
    for k, v in stats.items():
        np.testing.assert_array_equal(model.state_dict()[k], v)
    assert int(bn.num_batches_tracked.value) == 1

    # train() again: the same graph drops (fresh masks) and updates statistics again.
    model.train()
    a = _run(pred, X, backend)
    step(x=X, y=Y)
    b = _run(pred, X, backend)
    assert int(bn.num_batches_tracked.value) == 2
    assert not np.allclose(a, b)
    assert not np.allclose(a, _run(fresh, X, backend), atol=1e-3)
    assert not np.array_equal(model.state_dict()["1.running_mean"], stats["1.running_mean"])


def test_training_mode_output_is_unchanged() -> None:
    """In training mode the switchable graph computes what PyTorch's training forward does."""
    X, _ = _data()
    bn = nn.BatchNorm1d(6)
    bn.weight.value = np.linspace(0.5, 2.0, 6).astype("float32")
    bn.bias.value = np.linspace(-1.0, 1.0, 6).astype("float32")
    g = Graph()
    got = _run(bn(g.input("x", (16, 6))), X)
    want = (X - X.mean(0)) / np.sqrt(X.var(0) + 1e-5) * bn.weight.value + bn.bias.value
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batchnorm2d_eval_on_training_graph() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(2.0, 3.0, size=(4, 3, 5, 5)).astype("float32")
    for affine in (True, False):
        bn = nn.BatchNorm2d(3, affine=affine)
        bn.running_mean.value = np.array([0.5, -1.0, 2.0], "float32")
        bn.running_var.value = np.array([2.0, 0.5, 4.0], "float32")
        g = Graph()
        out = bn(g.input("x", X.shape))
        bn.eval()
        want = (X - bn.running_mean.value.reshape(1, 3, 1, 1)) / np.sqrt(
            bn.running_var.value.reshape(1, 3, 1, 1) + 1e-5
        )
        if affine:
            want = want * bn.weight.value.reshape(1, 3, 1, 1) + bn.bias.value.reshape(1, 3, 1, 1)
        np.testing.assert_allclose(_run(out, X), want, rtol=1e-5, atol=1e-5)


def test_mode_is_not_state() -> None:
    """The mode variable is not in state_dict: old checkpoints load, the mode is not restored."""
    model = _model()
    keys = set(model.state_dict())
    g = Graph()
    model(g.input("x", (16, 6)))  # creates the mode variables
    assert set(model.state_dict()) == keys
    assert not any("training" in k for k in keys)
    model.eval()
    other = _model()
    other.load_state_dict(model.state_dict())
    assert other.training
    assert not model.training
    modes = [v for v in g.variables() if v.name.startswith("training")]
    assert len(modes) == 2  # BatchNorm's and Dropout's
    assert not any(v.trainable for v in modes)


def test_graph_traced_in_eval_mode_stays_an_evaluation_graph() -> None:
    """Documented rule: a graph traced in eval mode has no dropout op and no batch
    statistics; train() does not change what it computes."""
    X, _ = _data()
    model = _model().eval()
    g = Graph()
    pred = model(g.input("x", (16, 6)))
    assert "dropout" not in {n.op for n in g.nodes}
    before = _run(pred, X)
    model.train()
    np.testing.assert_array_equal(_run(pred, X), before)
    # and it still runs on a single example (no batch statistics)
    one = model.eval()(Graph().input("x", (1, 6)))
    assert _run(one, X[:1]).shape == (1, 2)


def test_attention_dropout_follows_the_mode() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 5, 8)).astype("float32")
    block = nn.TransformerBlock(8, 2, 16, dropout=0.3, rng=0)
    g = Graph()
    out = block(g.input("x", X.shape))
    train_a = _run(out, X)
    block.eval()
    fresh = block(Graph().input("x", X.shape))
    np.testing.assert_allclose(_run(out, X), _run(fresh, X), rtol=1e-5, atol=1e-6)
    block.train()
    np.testing.assert_array_equal(_run(out, X), train_a)


@pytest.mark.parametrize("affine", [True, False])
def test_gradients_of_a_training_graph_in_eval_mode(affine: bool) -> None:
    """Gradients flow through the branch the mode selects: a graph traced in training
    mode and run in eval mode has the gradients of the running-statistics formula."""
    from asgrad.autograd import gradient_check

    rng = np.random.default_rng(2)
    layers = (nn.BatchNorm1d(3, affine=affine, dtype="float64"), nn.Dropout(0.5, seed=1))
    bn, drop = layers
    bn.running_mean.value = rng.normal(size=3)
    bn.running_var.value = rng.uniform(0.5, 2.0, size=3)
    params = bn.parameters()

    def build(x: object, *ps: object) -> object:
        g = x.graph  # type: ignore[attr-defined]
        for p, t in zip(params, ps, strict=True):
            g._variables[id(p)] = t.node  # type: ignore[attr-defined]
        for layer in layers:
            layer.train()
        out = drop(bn(x))
        for layer in layers:
            layer.eval()  # the graph runs in eval mode
        return out

    gradient_check(build, [rng.normal(size=(5, 3)), *(p.value for p in params)])
    # in eval mode the output is the running-statistics formula's
    g = Graph()
    x = g.input("x", (5, 3), dtype="float64")
    out = build(x, *(g.bind(p) for p in params))
    X = rng.normal(size=(5, 3))
    want = (X - bn.running_mean.value) / np.sqrt(bn.running_var.value + 1e-5)
    if affine:
        want = want * bn.weight.value + bn.bias.value
    np.testing.assert_allclose(_run(out, X), want, rtol=1e-9, atol=1e-9)
