"""CPU buffer reuse on whole training steps (asgrad.nn models): bit for bit the same.

Generated functions write results into dying inputs and scratch slots unless
``ASGRAD_CPU_REUSE=0``; a training step must not change by a bit. The per-op tests
are in ``packages/tensor/tests/test_cpu_buffer_reuse.py`` and ``test_writes_out.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph, Tensor
from asgrad.tensor.cpu import CPUExecutable
from asgrad.tensor.runtime.executor import Program


def _compiled(monkeypatch: pytest.MonkeyPatch, reuse: bool, build: Callable[[], Any]) -> Any:
    """``build()`` with reuse on or off (read when the function is generated: first run)."""
    monkeypatch.setenv("ASGRAD_CPU_REUSE", "1" if reuse else "0")
    return build()


def _source(program: Program) -> str:
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    source: str = fn.source
    return source


def _same(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        # Same dtype and shape (strict), NaN equals NaN, bit-identical otherwise.
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


# -- training steps --------------------------------------------------------------------------
def _xor() -> tuple[Program, dict[str, np.ndarray]]:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    model.initialize(0)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    loss = nn.mse_loss(model(x), y)
    program = nn.SGD(model.parameters(), lr=0.5, momentum=0.9).compile(loss, backend="cpu")
    feeds: dict[str, np.ndarray] = {
        "x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32),
        "y": np.array([[0], [1], [1], [0]], np.float32),
    }
    return program, feeds


def _mlp() -> tuple[Program, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU())
    model = nn.Sequential(model, nn.Linear(16, 10))
    model.initialize(0)
    g = Graph("mlp")
    x, y = g.input("x", (24, 48)), g.input("y", (24,), "int64")
    loss = nn.cross_entropy(model(x), y)
    program = nn.Adam(model.parameters(), lr=1e-2).compile(loss, backend="cpu")
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((24, 48)).astype(np.float32),
        "y": rng.integers(0, 10, (24,)).astype(np.int64),
    }
    return program, feeds


def _cnn() -> tuple[Program, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 3 * 3, 5),
    )  # fmt: skip
    model.initialize(0)
    g = Graph("cnn")
    x, y = g.input("x", (6, 1, 12, 12)), g.input("y", (6,), "int64")
    loss = nn.cross_entropy(model(x), y)
    program = nn.Adam(model.parameters(), lr=1e-2).compile(loss, backend="cpu")
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((6, 1, 12, 12)).astype(np.float32),
        "y": rng.integers(0, 5, (6,)).astype(np.int64),
    }
    return program, feeds


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        h, dh = self.heads, d // self.heads
        qkv = self.qkv(self.ln1(x))
        q, k, v = (
            qkv[:, :, i * d : (i + 1) * d].reshape(b, t, h, dh).transpose(0, 2, 1, 3)
            for i in range(3)
        )
        mask = np.triu(np.full((t, t), -1e9, dtype=np.float32), 1)
        att = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(dh)) + x.graph.constant(mask)
        y = (att.softmax(-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + self.proj(y)
        out: Tensor = x + self.ff2(self.ff1(self.ln2(x)).gelu())
        return out


def _transformer() -> tuple[Program, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    block, head = _Block(16, 2, 32), nn.Linear(16, 7)
    model = nn.Sequential(block, head)
    model.initialize(0)
    g = Graph("transformer")
    x, y = g.input("x", (3, 8, 16)), g.input("y", (24,), "int64")
    loss = nn.cross_entropy(model(x).reshape(24, 7), y)
    program = nn.AdamW(model.parameters(), lr=1e-2).compile(loss, backend="cpu")
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((3, 8, 16)).astype(np.float32),
        "y": rng.integers(0, 7, (24,)).astype(np.int64),
    }
    return program, feeds


@pytest.mark.parametrize("build", [_xor, _mlp, _cnn, _transformer], ids=lambda f: f.__name__[1:])
def test_training_is_bit_identical_with_and_without_reuse(
    monkeypatch: pytest.MonkeyPatch, build: Callable[[], tuple[Program, dict[str, np.ndarray]]]
) -> None:
    runs = []
    for reuse in (False, True):
        program, feeds = _compiled(monkeypatch, reuse, build)
        losses = [float(program(feeds)[0]) for _ in range(20)]
        params = [v.value.copy() for v in program.schedule.variables()]
        runs.append((losses, params, _source(program)))
    (off_losses, off_params, off_src), (on_losses, on_params, on_src) = runs
    assert on_losses == off_losses
    assert on_losses[-1] < on_losses[0]
    _same(on_params, off_params)
    assert "out=" not in off_src
    if build is not _xor:  # the xor step's arrays are tiny but reused all the same
        assert "out=" in on_src


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
        if (m := re.match(r"\s+v(\d+) = j?k\d+\(", line))  # a kernel, or its compiled one
        for node in [schedule.nodes[int(m.group(1))]]
    }
    for op in ("conv2d", "max_pool2d", "max_pool2d_backward", "conv2d_backward_weight"):
        assert re.search(r"out=_s\d+\)$", lines[op]), (op, lines.get(op))
