"""Runs of small lines as one compiled call (asgrad.tensor.cpu.jit.fuse_segments)
against the numpy reference path.

A small classifier's training step on the line path (no whole step) becomes a few
segment calls around its products: the bias adds and ReLUs, the cross-entropy and its
gradient, Adam's scalars and the small parameters' updates. Training gives the numpy
path's numbers within rounding, a label out of range raises the numpy path's typed
error, and a segment Numba cannot compile runs on numpy with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn
from asgrad.tensor import Graph, OutOfRangeError
from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.jit import fuse_segments, step


@pytest.fixture(autouse=True)
def _line_path_with_segments(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The compiled path's line function (the whole step, which would take these small
    steps, off), the environment's switch again after each test."""
    monkeypatch.setattr(step, "WORK_LIMIT", 0)
    monkeypatch.setattr(step, "STEP_WORK_LIMIT", 0)
    yield
    jit.set_enabled(None)


def _classifier(dtype: str) -> tuple[Any, dict[str, np.ndarray], list[Any]]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(96, 48), nn.ReLU(), nn.Linear(48, 10))
    model.initialize(0)
    model.to(dtype)
    g = Graph()
    x, y = g.input("x", (16, 96), dtype), g.input("y", (16,), "int64")
    loss = nn.cross_entropy(model(x), y)
    params = list(model.parameters())
    program = nn.Adam(params, lr=1e-2).compile(loss, backend="cpu")
    feeds = {
        "x": rng.standard_normal((16, 96)).astype(dtype),
        "y": rng.integers(0, 10, (16,)).astype(np.int64),
    }
    return program, feeds, params


def _train(flag: bool, dtype: str) -> tuple[list[float], list[np.ndarray], str]:
    jit.set_enabled(flag)
    program, feeds, params = _classifier(dtype)
    losses = [float(program(feeds)[0]) for _ in range(6)]
    executable: Any = program.executable  # a CPUExecutable: its generated function
    source: str = executable.function(feeds).source
    return losses, [p.value.copy() for p in params], source


@pytest.mark.parametrize(("dtype", "rtol"), [("float64", 1e-10), ("float32", 2e-4)])
def test_a_small_training_step_runs_as_few_segments_and_trains_as_the_numpy_path(
    dtype: str, rtol: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    on = _train(True, dtype)
    off = _train(False, dtype)
    with monkeypatch.context() as m:
        m.setattr(fuse_segments, "SMALL_ELEMENTS", 0)
        apart = _train(True, dtype)
    calls = re.findall(r"= (_segment\d+)\(", on[2])
    assert len(calls) >= 3, on[2]
    assert "_segment" not in off[2]
    assert "_segment" not in apart[2]
    # Far fewer lines than each op its own.
    assert on[2].count("\n") < apart[2].count("\n") * 2 // 3
    # The products stay numpy's (BLAS's threads), outside the segments.
    assert on[2].count("_matmul(") == apart[2].count("_matmul(")
    np.testing.assert_allclose(on[0], off[0], rtol=rtol)
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


def _compiled_source(*ys: Any, x: np.ndarray) -> str:
    from asgrad.tensor import compile

    jit.set_enabled(True)
    program = compile(list(ys))
    program({"x": x})
    executable: Any = program.executable
    source: str = executable.function({"x": x}).source
    return source


def test_a_run_of_one_line_stays_a_line_and_two_become_a_segment() -> None:
    a = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    one, two = Graph(), Graph()
    single = _compiled_source(one.input("x", (3, 4)).exp(), x=a)
    double = _compiled_source((two.input("x", (3, 4)).exp() * 3.0).sum(), x=a)
    assert "_segment" not in single
    assert len(re.findall(r"= _segment\d+\(", double)) == 1, double


def test_a_label_out_of_range_raises_the_numpy_paths_typed_error_and_updates_nothing() -> None:
    jit.set_enabled(True)
    program, feeds, params = _classifier("float32")
    program(feeds)
    executable: Any = program.executable
    assert "one_hot" not in executable.function(feeds).source  # inside a segment
    before = [p.value.copy() for p in params]
    bad = dict(feeds, y=np.where(np.arange(16) == 3, 10, feeds["y"]))
    with pytest.raises(OutOfRangeError, match="one_hot: index 10 is out of range"):
        program(bad)
    for p, b in zip(params, before, strict=True):
        np.testing.assert_array_equal(p.value, b)
    program(feeds)  # and the next good step runs, compiled
    assert not np.array_equal(params[0].value, before[0])


def test_a_segment_numba_cannot_compile_runs_on_numpy_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from numba.core.errors import TypingError

    from asgrad.tensor.cpu.jit import step_run

    class _Refusing:
        @staticmethod
        def segment(*args: Any) -> Any:
            raise TypingError("no implementation for this call")

    real = step_run.load_module
    monkeypatch.setattr(
        step_run,
        "load_module",
        lambda source, prefix: _Refusing if prefix == "asgrad_segment" else real(source, prefix),
    )
    off = _train(False, "float64")
    with pytest.warns(RuntimeWarning, match="could not compile a run of small CPU lines"):
        on = _train(True, "float64")
    assert "_segment" in on[2]
    np.testing.assert_allclose(on[0], off[0], rtol=1e-12)
    for a, b in zip(on[1], off[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_elementwise_ops_join_one_loop_only_where_each_reads_the_element_it_writes() -> None:
    from asgrad.tensor import compile

    x = np.arange(16, dtype=np.float32).reshape(4, 4) / 7.0
    g = Graph()
    t = g.input("x", (4, 4))
    a = t * 2.0
    # b reads a where its loop writes it; c reads a transposed and d a row of it
    # broadcast: both read elements a later iteration of a's loop would write.
    b = (a + 1.0).exp()
    c = a.swapaxes(0, 1) - b
    d = a[1:2, :] * c
    ys = [b * 1.5, c * 0.5, d.sum()]
    jit.set_enabled(True)
    program = compile(ys)
    got = program({"x": x})
    source = fuse_segments_source(program, x)
    jit.set_enabled(False)
    expected = compile(ys)({"x": x})
    for p, q in zip(got, expected, strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-6)
    # One segment: a, b and b's output in one loop; c (and its output) in a second,
    # since it reads a transposed; d in a third (it reads a through a view, which
    # the open loop's check does not look into); the sum's loop its own.
    assert source.count("for i0_0 in range(4 * _u):") == 3, source


def fuse_segments_source(program: Any, x: np.ndarray) -> str:
    """The Numba source of the one segment ``program``'s function calls (compiled by
    the call before, its module's file)."""
    from pathlib import Path

    executable: Any = program.executable
    fn = executable.function({"x": x})
    names = re.findall(r"= (_segment\d+)\(", fn.source)
    assert len(names) == 1, fn.source
    callee = fn.__globals__[names[0]]
    return Path(callee.py_func.__code__.co_filename).read_text()


def test_segments_stay_within_the_compile_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    off = _train(False, "float64")
    with monkeypatch.context() as m:
        m.setattr(fuse_segments, "COMPILE_BUDGET", 0.0)
        none = _train(True, "float64")
    everything = _train(True, "float64")
    costs: dict[str, float] = {}

    def spy(source: str) -> float:
        cost = real(source)
        costs[source] = cost
        return cost

    real = fuse_segments.compile_seconds
    with monkeypatch.context() as m:
        m.setattr(fuse_segments, "compile_seconds", spy)
        _train(True, "float64")
        cheapest = min(costs.values())
        m.setattr(fuse_segments, "COMPILE_BUDGET", cheapest * 1.01)
        one = _train(True, "float64")
    assert "_segment" not in none[2]
    assert len(re.findall(r"= _segment\d+\(", everything[2])) >= 3
    assert len(re.findall(r"= _segment\d+\(", one[2])) == 1, one[2]
    for run in (none, one, everything):
        np.testing.assert_allclose(run[0], off[0], rtol=1e-10)
