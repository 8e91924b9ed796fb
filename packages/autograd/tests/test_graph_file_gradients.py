"""A loaded graph differentiates exactly like the original: for every
differentiable registry op case, the gradients built on the loaded graph equal, bit
for bit, those built on the graph that was saved (a loop's too: its body is loaded
as a nested graph); gradient nodes carry their role."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, OpCase, OpDef, Tensor, all_ops, evaluate
from asgrad.tensor.io.graph_file import load_graph


def _cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(5)
    return [
        (op, c)
        for op in all_ops()
        if op.cases is not None and op.differentiable
        for c in op.cases(rng)
        if c.grad
    ]


CASES = _cases()


def _grads(g: Graph, out: Tensor, wrt: list[str]) -> list[Tensor]:
    loss = (out.cast("float64") * g["projection"]).sum()
    return grad(loss, [g[name] for name in wrt])


@pytest.mark.parametrize(
    ("op", "case"), CASES, ids=[f"{op.name}[{c.label or i}]" for i, (op, c) in enumerate(CASES)]
)
def test_loaded_graph_differentiates_alike(op: OpDef, case: OpCase, tmp_path: Path) -> None:
    arrays = [np.asarray(a) for a in case.inputs]
    g = Graph("case")
    xs = [
        g.input(f"x{i}", a.shape, {"f": "float64", "b": "bool"}.get(a.dtype.kind, "int64"), free=())
        for i, a in enumerate(arrays)
    ]
    out = g.apply(op.name, xs, dict(case.attrs))
    g.input("projection", out.shape, "float64", free=())
    g.save(tmp_path / "g.json", outputs=[out])
    loaded = load_graph(tmp_path / "g.json")
    chosen = (
        case.wrt
        if case.wrt is not None
        else [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    )
    wrt = [f"x{i}" for i in chosen]
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": a.astype(xs[i].dtype) for i, a in enumerate(arrays)}
    feeds["projection"] = rng.standard_normal(out.shape)
    want = evaluate(_grads(g, out, wrt), feeds)
    got_tensors = _grads(loaded.graph, loaded.outputs[0], wrt)
    got = evaluate(got_tensors, feeds)
    for w, o in zip(want, got, strict=True):
        np.testing.assert_array_equal(o, w)
    for name, t in zip(wrt, got_tensors, strict=True):
        assert t.node.meta["role"] == "gradient"
        assert name in t.node.meta["grad_wrt"]


def test_gradient_nodes_record_their_forward_node() -> None:
    g = Graph()
    x = g.input("x", (3,), "float64")
    y = x.tanh()
    (dx,) = grad((y * y).sum(), [x])
    made = g.nodes[g.nodes.index(y.node) + 1 :]
    backward = [n for n in made if n.meta.get("role") == "gradient"]
    assert backward
    assert all(n.meta["scope"].startswith("backward") for n in backward)
    assert any(n.meta.get("grad_of") == y.node.name for n in backward)
    assert dx.node.meta["grad_wrt"] == ["x"]
    assert "role" not in y.node.meta
