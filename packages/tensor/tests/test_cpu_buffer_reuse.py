"""The CPU executor's buffer reuse: the same values with it on and off, and its safety.

Generated functions write elementwise results into dying inputs (``out=`` the input)
and ufunc/matrix-product results into scratch slots kept across runs, unless
``ASGRAD_CPU_REUSE=0``. These tests compare bit for bit against reuse off.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph, Tensor, Variable, all_ops, compile
from asgrad.tensor.executor import CPUExecutable, Program


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
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype
        assert x.shape == y.shape
        np.testing.assert_array_equal(x, y)  # NaN equals NaN; bit-identical otherwise


def _op_case_programs() -> list[tuple[str, Any]]:
    out = []
    for op in all_ops():
        if op.cases is None or op.family in ("leaf", "random"):
            continue
        for k, case in enumerate(op.cases(np.random.default_rng(0))):
            out.append((f"{op.name}-{k}", (op.name, case)))
    return out


def _op_program(name: str, case: Any) -> tuple[Program, dict[str, np.ndarray]] | None:
    g = Graph()
    feeds: dict[str, np.ndarray] = {}
    inputs: list[Tensor] = []
    for j, value in enumerate(case.inputs):
        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        feeds[f"i{j}"] = array
        t = g.input(f"i{j}", array.shape, str(array.dtype))
        if array.dtype == np.float32 and array.ndim:
            t = t * 1.0  # a fresh intermediate (bit-exact), so the op may reuse its memory
        inputs.append(t)
    try:
        y = g.apply(name, inputs, dict(case.attrs))
    except Exception:  # a case that needs float64 inputs: not this test's subject
        return None
    outputs = [y]
    if y.dtype == "float32" and y.shape:
        z = (y * 2.0 + 1.0) * y  # in-place chain after the op
        outputs += [z.exp() - z, (y - 0.5).sum()]
    return compile(outputs), feeds


_CASES = _op_case_programs()


@pytest.mark.parametrize(("label", "case"), _CASES, ids=[p[0] for p in _CASES])
def test_registered_op_cases_are_bit_identical_with_and_without_reuse(
    monkeypatch: pytest.MonkeyPatch, label: str, case: Any
) -> None:
    name, op_case = case
    results: list[Any] = []
    for reuse in (False, True):
        made = _compiled(monkeypatch, reuse, lambda: _op_program(name, op_case))
        if made is None:
            pytest.skip("the case does not build in float32")
        program, feeds = made
        try:
            first = [np.array(v, copy=True) for v in program(feeds)]
        except Exception as exc:  # same failure either way
            results.append(type(exc))
            continue
        second = program(feeds)  # scratch slots already written once
        _same(first, second)
        results.append(first)
    if isinstance(results[0], list) and isinstance(results[1], list):
        _same(results[0], results[1])
    else:
        assert results[0] == results[1]


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


# -- safety ----------------------------------------------------------------------------------
def test_outputs_and_updates_are_not_overwritten_by_the_next_run() -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    v = Variable("v", np.ones((4, 5), np.float32))
    p = g.parameter("v", variable=v)
    h = (x * 2.0 + 1.0) * p  # intermediates in scratch slots
    out1 = h.exp()
    out2 = (h - 1.0).transpose() @ (h + 1.0)
    program = compile([out1, out2, h], {v: (h * 0.5 + p) * 0.5})
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((4, 5)).astype(np.float32)} for _ in range(3)]
    results, values = [], []
    for f in feeds:
        results.append(program(f))
        values.append(v.value)
    kept = [[r.copy() for r in res] for res in results]
    kept_values = [a.copy() for a in values]
    program(feeds[0])
    for res, copy in zip(results, kept, strict=True):
        _same(res, copy)
    _same(values, kept_values)
    assert len({id(a) for res in results for a in res} | {id(a) for a in values}) == 12


def _line(source: str, pattern: str) -> str:
    return next(line.strip() for line in source.splitlines() if re.search(pattern, line))


def test_a_live_view_of_a_dying_value_prevents_writing_into_it() -> None:
    value = np.arange(36, dtype=np.float32).reshape(6, 6)
    yy = value * np.float32(2.0)
    for with_view in (True, False):
        g = Graph()
        x = g.input("x", (6, 6))
        y = x * 2.0  # a fresh intermediate
        t = y.transpose() if with_view else x  # made first: the product below reads t first
        z = y + 1.0  # y's last direct use
        program = compile([(t * z).sum()])
        got = program({"x": value})[0]
        np.testing.assert_array_equal(
            got, np.add.reduce((yy.T if with_view else value) * (yy + 1), None)
        )
        source = _source(program)
        y_name = _line(source, r"= k\d+\(v\d+, c\d+, out=_s").split(" = ")[0]
        add = _line(source, rf"= k\d+\({y_name}, c\d+")
        if with_view:
            assert ".transpose(" in source
            assert source.index(".transpose(") < source.index(add)  # the view is live
            assert f"out={y_name})" not in add  # so y is not written
        else:
            assert add.endswith(f"out={y_name})")


def test_an_elementwise_chain_is_computed_in_place() -> None:
    g = Graph()
    x = g.input("x", (32, 16))
    h = ((x * 2.0) + 1.0).exp()
    program = compile([h.sum(axis=1)])
    value = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    got = program({"x": value})[0]
    np.testing.assert_array_equal(got, np.add.reduce(np.exp(value * np.float32(2) + 1), 1))
    source = _source(program)
    mul = _line(source, r"= k\d+\(v\d+, c\d+, out=_s\d+\)$")  # x * 2 into a scratch slot
    product = mul.split(" = ")[0]
    add = _line(source, rf"= k\d+\({product}, c\d+, out={product}\)$")  # + 1 in place
    total = add.split(" = ")[0]
    assert re.search(rf"= k\d+\({total}, out={total}\)$", source, re.M)  # exp in place


def test_reuse_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_CPU_REUSE", "0")
    g = Graph()
    x = g.input("x", (8, 8))
    program = compile([(((x * 2.0) + 1.0).exp() @ x).sum()])
    program({"x": np.ones((8, 8), np.float32)})
    assert "out=" not in _source(program)
    assert "_scratch" not in _source(program)
