"""Graphs holding loops round-trip through the graph file: a recurrent layer's ``scan``
(an LSTM's training step, saved before and after the passes) and loops nested in
loops load as nested graphs, run and differentiate alike, and the file holds no
absolute path of the machine that wrote it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.autograd import grad
from asgrad.tensor import Graph, Program, Tensor, compile, evaluate, fori_loop, scan
from asgrad.tensor.io.graph_file import load_graph, save_graph
from asgrad.tensor.loops.body import Body


def _lstm() -> tuple[Graph, Tensor, nn.Module, dict[str, np.ndarray]]:
    lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True, rng=0)
    head = nn.Linear(5, 1, rng=1)
    g = Graph("lstm")
    x, y = g.input("x", (2, 4, 3)), g.input("y", (2, 1))
    out, (h, _) = lstm(x)
    loss = nn.mse_loss(head(out[:, -1]) + h[-1].sum(axis=1, keepdims=True), y)
    model = nn.Sequential(lstm, head)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((2, 4, 3)).astype(np.float32),
        "y": rng.standard_normal((2, 1)).astype(np.float32),
    }
    return g, loss, model, feeds


def _bodies(loaded_graph: Graph) -> list[Body]:
    return [n.attrs["loop"] for n in loaded_graph.nodes if n.op == "scan"]


def test_lstm_graph_runs_and_differentiates_alike(tmp_path: Path) -> None:
    g, loss, _, feeds = _lstm()
    g.save(tmp_path / "g.json", outputs=[loss])
    loaded = load_graph(tmp_path / "g.json")
    bodies = _bodies(loaded.graph)
    assert len(bodies) == 2  # one scan per layer
    assert all(b.graph.parent is loaded.graph for b in bodies)
    assert all(b.outer and all(o.graph is loaded.graph for o in b.outer) for b in bodies)
    params = [n.name for n in g.parameters]
    want = evaluate([loss, *grad(loss, [g[p] for p in params])], feeds)
    lloss = loaded.outputs[0]
    got = evaluate([lloss, *grad(lloss, [loaded.graph[p] for p in params])], feeds)
    assert len(got) == len(want) == 1 + len(params)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_lstm_training_step_trains_alike(tmp_path: Path) -> None:
    _, loss, model, feeds = _lstm()
    step: Program = nn.Adam(model.parameters(), lr=1e-2).compile(loss)
    save_graph(step, tmp_path / "step.json")
    loaded = load_graph(tmp_path / "step.json")
    assert _bodies(loaded.graph)  # forward and backward loops, after the passes
    again = compile(loaded.outputs, loaded.graph.updates)
    for _ in range(3):
        np.testing.assert_array_equal(again(feeds)[0], step(feeds)[0])
    by_name = {v.name: v for v in loaded.graph.updates}
    for var in step.schedule.variables():
        if var.name in by_name:
            np.testing.assert_array_equal(by_name[var.name].value, var.value)


def _nested() -> tuple[Graph, Tensor, dict[str, np.ndarray]]:
    g = Graph("nested")
    w = g.input("w", (3, 3))
    xs = g.input("xs", (4, 3))

    def outer(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        def inner(i: Tensor, v: Tensor) -> Tensor:
            return (v @ w + x).tanh()  # captures w from two levels out, x from one

        new = fori_loop(0, 2, inner, h)
        return new, new.sum()

    h, ys = scan(outer, g.constant(np.zeros(3, np.float32)), xs)
    total = h.sum() + ys.sum()
    rng = np.random.default_rng(1)
    feeds = {
        "w": (rng.standard_normal((3, 3)) * 0.5).astype(np.float32),
        "xs": rng.standard_normal((4, 3)).astype(np.float32),
    }
    return g, total, feeds


def test_nested_loops_load_as_nested_graphs(tmp_path: Path) -> None:
    g, total, feeds = _nested()
    g.save(tmp_path / "g.json", outputs=[total])
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["version"] == 2
    assert len(data["bodies"]) == 2
    assert [b["name"] for b in data["bodies"]] == ["outer", "inner"]
    loaded = load_graph(tmp_path / "g.json")
    (outer,) = _bodies(loaded.graph)
    (inner,) = [n.attrs["loop"] for n in outer.graph.nodes if n.op == "scan"]
    assert inner.graph.parent is outer.graph
    assert outer.where.startswith("tests/test_graph_file_loops.py:")
    w = loaded.graph["w"]
    want = evaluate([total, *grad(total, [g["w"]])], feeds)
    got = evaluate([loaded.outputs[0], *grad(loaded.outputs[0], [w])], feeds)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_loaded_body_is_traced_again_for_other_dtypes(tmp_path: Path) -> None:
    g, total, _ = _nested()
    g.save(tmp_path / "g.json", outputs=[total])
    loaded = load_graph(tmp_path / "g.json")
    (body,) = _bodies(loaded.graph)
    again = body.at(["float64"] * len(body.inputs))  # replayed from its own nodes
    assert again is not body
    assert [n.dtype for n in again.outputs] == ["float64", "float64"]
    assert [n.id for n in again.outer] == [n.id for n in body.outer]


def test_files_hold_no_absolute_paths(tmp_path: Path) -> None:
    _, loss, model, _ = _lstm()
    step = nn.Adam(model.parameters(), lr=1e-2).compile(loss)
    save_graph(step, tmp_path / "step.json")
    text = (tmp_path / "step.json").read_text()
    here = str(Path(__file__).resolve().parent.parent)
    assert here not in text

    def locations(entries: list[dict[str, Any]]) -> list[str]:
        return [e["location"] for e in entries]

    data = json.loads(text)
    found = locations(data["nodes"]) + [b["where"] for b in data["bodies"]]
    for body in data["bodies"]:
        found += locations(body["nodes"])
    assert found
    assert not [loc for loc in found if os.path.isabs(loc.rpartition(":")[0])]
    assert any(loc.startswith("tests/test_graph_file_loops.py:") for loc in found)
