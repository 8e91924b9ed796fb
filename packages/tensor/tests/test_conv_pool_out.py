"""The conv/pool kernels write into ``out=``: the CPU executor lends them scratch slots."""

from __future__ import annotations

import re

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph
from asgrad.tensor.cpu_backend import OUT_KERNEL_OPS, CPUExecutable
from asgrad.tensor.registry import get_op


def _cases() -> list[tuple[str, int]]:
    out = []
    for name in sorted(OUT_KERNEL_OPS):
        cases = get_op(name).cases
        assert cases is not None
        out += [(name, k) for k in range(len(cases(np.random.default_rng(0))))]
    return out


@pytest.mark.parametrize(("name", "k"), _cases())
def test_out_gets_the_same_bits_as_a_fresh_result(name: str, k: int) -> None:
    op = get_op(name)
    assert op.cases is not None
    case = op.cases(np.random.default_rng(0))[k]
    for dtype in (np.float32, np.float64):
        inputs = [np.asarray(a).astype(dtype) for a in case.inputs]
        fresh = op.kernel(*inputs, **case.attrs)
        out = np.full(fresh.shape, np.nan, dtype=dtype)  # stale contents must not leak
        got = op.kernel(*inputs, **case.attrs, out=out)
        assert got is out
        np.testing.assert_array_equal(got, fresh)
        assert np.array_equal(got.view(np.uint8), fresh.view(np.uint8))  # signed zeros too


def test_a_cnn_step_writes_conv_and_pool_results_into_scratch_slots() -> None:
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3)
    )
    model.initialize(0)
    g = Graph("cnn")
    x, y = g.input("x", (5, 1, 8, 8)), g.input("y", (5,), "int64")
    program = nn.Adam(model.parameters(), lr=1e-2).compile(
        nn.cross_entropy(model(x), y), backend="cpu"
    )
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((5, 1, 8, 8)).astype(np.float32),
        "y": rng.integers(0, 3, (5,)).astype(np.int64),
    }
    losses = [float(program(feeds)[0]) for _ in range(5)]
    assert losses[-1] < losses[0]
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    schedule = program.schedule
    lines = {
        node.op: line
        for line in fn.source.splitlines()
        if (m := re.match(r"\s+v(\d+) = k\d+\(", line))
        for node in [schedule.nodes[int(m.group(1))]]
    }
    for op in ("conv2d", "max_pool2d", "max_pool2d_backward", "conv2d_backward_weight"):
        assert re.search(r"out=_s\d+\)$", lines[op]), (op, lines.get(op))
