"""The three example models' graphs round-trip through the graph file.

For each model, the forward graph saved and loaded gives the same loss and the same
gradients (built on the loaded graph) bit for bit, and the compiled training step
saved and loaded runs the same steps: the same losses and the same variable values.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.examples import cnn, xor
from asgrad.examples.transformer import CharTransformer
from asgrad.tensor import Graph, Program, Tensor, compile, evaluate
from asgrad.tensor.io.graph_file import load_graph, save_graph

Built = tuple[Graph, Tensor, nn.Module, Callable[[nn.Module], nn.Optimizer], dict[str, np.ndarray]]


def _xor() -> Built:
    model = xor.build_model(0)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    loss = nn.mse_loss(model(x), y)
    feeds = {"x": xor.INPUTS, "y": xor.TARGETS}
    return g, loss, model, lambda m: nn.SGD(m.parameters(), lr=0.5, momentum=0.9), feeds


def _cnn() -> Built:
    model = cnn.build_model((8, 8), 0)
    g = Graph("cnn-train")
    x, y = g.input("x", (4, 1, 8, 8)), g.input("y", (4,), "int64")
    loss = nn.cross_entropy(model(x), y)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 1, 8, 8)).astype(np.float32), "y": np.arange(4)}
    return g, loss, model, lambda m: nn.Adam(m.parameters(), lr=1e-3), feeds


def _transformer() -> Built:
    model = CharTransformer(20, dim=16, num_heads=2, num_layers=2, context=8)
    g = Graph("lm-train")
    x, y = g.input("x", (2, 8), "int64"), g.input("y", (2, 8), "int64")
    loss = nn.cross_entropy(model(x), y, axis=-1)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.integers(0, 20, (2, 8)), "y": rng.integers(0, 20, (2, 8))}

    def adamw(m: nn.Module) -> nn.Optimizer:
        return nn.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01, clip_grad_norm=1.0)

    return g, loss, model, adamw, feeds


MODELS = {"xor": _xor, "cnn": _cnn, "transformer": _transformer}


@pytest.mark.parametrize("name", MODELS)
def test_forward_graph_runs_and_differentiates_alike(name: str, tmp_path: Path) -> None:
    g, loss, _, _, feeds = MODELS[name]()
    g.save(tmp_path / "g.json", outputs=[loss])
    loaded = load_graph(tmp_path / "g.json")
    params = [n.name for n in g.parameters if n.attrs["variable"].trainable]
    assert params == [n.name for n in loaded.graph.parameters if n.attrs["variable"].trainable]
    want = evaluate([loss, *grad(loss, [g[p] for p in params])], feeds)
    lloss = loaded.outputs[0]
    got = evaluate([lloss, *grad(lloss, [loaded.graph[p] for p in params])], feeds)
    assert len(got) == len(want) > 1
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    # module scopes were saved: the transformer's attention nodes sit in their block
    scopes = {n.meta.get("scope", "") for n in loaded.graph.nodes}
    assert scopes == {n.meta.get("scope", "") for n in g.nodes}
    if name == "transformer":
        assert {"blocks.0.attn", "blocks.1.ff.fc1", "head"} <= scopes


@pytest.mark.parametrize("name", MODELS)
def test_saved_training_step_trains_alike(name: str, tmp_path: Path) -> None:
    _, loss, model, optimizer, feeds = MODELS[name]()
    step: Program = optimizer(model).compile(loss)
    save_graph(step, tmp_path / "step.json")
    loaded = load_graph(tmp_path / "step.json")
    again = compile(loaded.outputs, loaded.graph.updates)
    roles = {n.meta.get("role") for n in loaded.graph.nodes}
    assert {None, "gradient", "optimizer"} <= roles
    for _ in range(3):
        np.testing.assert_array_equal(again(feeds)[0], step(feeds)[0])
    by_name = {v.name: v for v in loaded.graph.updates}
    for var in step.schedule.variables():
        if var.name in by_name:
            np.testing.assert_array_equal(by_name[var.name].value, var.value)
    assert {p.name for p in model.parameters()} <= set(by_name)
