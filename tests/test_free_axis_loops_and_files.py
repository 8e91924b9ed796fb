"""Graphs with a loop, and graphs loaded from a file, fed other sizes of a free axis.

A graph holding an op built for the declared size of a free axis (``roll`` along the
batch) is traced again per fed size (`asgrad.tensor.ir.retrace`), a loop (``scan``)
among its ops included, gradients too. A graph loaded from a graph file keeps no record
of how its ops were built and cannot be: fed another size of that axis, it raises a
[`FeedError`][asgrad.tensor.FeedError] naming the op and the line that made it, never
the declared size's result (a fed size 1 would broadcast into the op's tables). Ops
built to follow any size (``tril``, reflect padding) still run at any size once loaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import FeedError, Graph, Tensor, compile, pad, scan
from asgrad.tensor.io.graph_file import load_graph, save_graph


def _rolled_with_a_loop() -> tuple[Graph, list[Tensor]]:
    g = Graph()
    x = g.input("x", (4, 5))
    steps = g.input("s", (3, 5), free=())

    def step(carry: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
        return carry + s, carry

    total, _ = scan(step, g.constant(np.zeros(5, np.float32)), steps)
    return g, [x.roll(6, 0) * total]


def _feeds(batch: int) -> dict[str, np.ndarray]:
    x = np.arange(5 * batch, dtype=np.float32).reshape(batch, 5)
    return {"x": x, "s": np.ones((3, 5), np.float32)}


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("batch", [4, 1, 3, 6])
def test_a_graph_with_a_loop_builds_an_op_for_the_declared_size_again_at_the_size_fed(
    batch: int, backend: str
) -> None:
    _, outs = _rolled_with_a_loop()
    feeds = _feeds(batch)
    (got,) = compile(outs, backend=backend)(feeds)
    np.testing.assert_array_equal(got, np.roll(feeds["x"], 6, 0) * 3.0)


@pytest.mark.parametrize("batch", [1, 3, 6])
def test_a_gradient_through_a_loop_and_an_op_for_the_declared_size_follows_the_size_fed(
    batch: int,
) -> None:
    g, (y,) = _rolled_with_a_loop()
    w = g.input("w", (4, 5))
    dx, ds = grad((y * w).sum(), [g["x"], g["s"]])
    feeds = {**_feeds(batch), "w": np.arange(5 * batch, dtype=np.float32).reshape(batch, 5)}
    got_dx, got_ds = compile([dx, ds])(feeds)
    x, w_fed = feeds["x"], feeds["w"]
    np.testing.assert_allclose(got_dx, np.roll(w_fed * 3.0, -6, 0))
    total_grad = (np.roll(x, 6, 0) * w_fed).sum(0)  # d sum / d total, the same per step
    np.testing.assert_allclose(got_ds, np.broadcast_to(total_grad, (3, 5)))


@pytest.mark.parametrize("batch", [1, 3])
def test_a_loaded_graph_refuses_other_sizes_for_an_op_built_for_the_declared_size(
    tmp_path: Path, batch: int
) -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    save_graph(g, tmp_path / "g.json", [x.roll(6, 0)])
    prog = compile(load_graph(tmp_path / "g.json").outputs)
    x4 = _feeds(4)["x"]
    np.testing.assert_array_equal(prog({"x": x4})[0], np.roll(x4, 6, 0))
    with pytest.raises(FeedError, match=r"roll \(made at .*test_free_axis_loops_and_files.py:\d+"):
        prog({"x": _feeds(batch)["x"]})


@pytest.mark.parametrize("batch", [3, 7])
def test_a_loaded_graph_of_ops_that_follow_the_size_runs_at_other_sizes(
    tmp_path: Path, batch: int
) -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    save_graph(g, tmp_path / "g.json", [x.tril(), pad(x, ((2, 1), (0, 0)), mode="reflect")])
    fed = _feeds(batch)["x"] + 1
    lower, padded = compile(load_graph(tmp_path / "g.json").outputs)({"x": fed})
    np.testing.assert_array_equal(lower, np.tril(fed))
    np.testing.assert_array_equal(padded, np.pad(fed, ((2, 1), (0, 0)), mode="reflect"))
