"""Loops in the whole step (asgrad.tensor.cpu.jit.emit_scan) against the numpy reference path.

A training step with ``scan`` nodes (forward, and the backward scan its gradient
makes) compiles into one Numba function whose time loops hold the bodies' ops: no
Python call per time step (the bodies' own programs are never run). Its outputs,
gradients and updated variables equal the numpy path's (float64, lengths 1 and more,
reversed, with and without saved carries), its gradients equal central finite
differences, and LSTM and GRU steps (bidirectional, two layers) train as on numpy. A
body with an op the whole step cannot write, or a loop step too large to win, keeps
the line-by-line function and says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn  # after the skip
from asgrad.autograd import grad
from asgrad.tensor import Graph, Program, Tensor, Variable, compile, scan
from asgrad.tensor.cpu import jit
from asgrad.tensor.loops.body import Body


@pytest.fixture(autouse=True)
def _switch_back() -> Iterator[None]:
    """The environment's switch again after each test (the tests set theirs)."""
    yield
    jit.set_enabled(None)


def _fn(program: Program, feeds: dict[str, np.ndarray]) -> Any:
    return program.executable.function(feeds)  # type: ignore[attr-defined]  # a CPU program


def _rnn_program(length: int, w: Variable) -> tuple[Program, dict[str, np.ndarray]]:
    """Two scans over ``xs`` (a tanh RNN with a captured weight, saving its carries;
    a reversed running sum that saves none) in an SGD step on ``w``; outputs: the loss
    and its gradients with respect to ``xs`` and ``w``."""
    g = Graph()
    xs = g.input("xs", (length, 2, 3), "float64", free=())
    h0 = g.input("h0", (2, 3), "float64", free=())
    wt = g.bind(w)

    def rnn(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        new = (h @ wt + x).tanh()
        return new, new.sin() * 2.0

    def running(s: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        new = s * 0.5 + x * x
        return new, new

    last, ys = scan(rnn, h0, xs)
    total, sums = scan(running, h0 * 0.0, ys, reverse=True, save_carries=False)
    loss = (ys * ys).mean() + last.sum() * 0.1 + (sums * sums).mean() + total.sum()
    d_xs, d_w = grad(loss, [xs, wt])
    program = compile([loss, d_xs, d_w], {w: wt - 0.1 * d_w})
    rng = np.random.default_rng(length)
    feeds = {"xs": rng.standard_normal((length, 2, 3)), "h0": rng.standard_normal((2, 3))}
    return program, feeds


def _run_both(
    build: Callable[[bool], tuple[Program, dict[str, np.ndarray], list[Variable]]], runs: int
) -> tuple[list[np.ndarray], list[np.ndarray], Any]:
    """Per path (compiled, then numpy): the outputs of each run then the variables' values."""
    results = []
    fn = None
    for flag in (True, False):
        jit.set_enabled(flag)
        program, feeds, variables = build(flag)
        outs = [[np.array(v) for v in program(feeds)] for _ in range(runs)]
        results.append([*(o for run in outs for o in run), *(np.array(v.value) for v in variables)])
        if flag:
            fn = _fn(program, feeds)
    return results[0], results[1], fn


@pytest.mark.slow
@pytest.mark.parametrize("length", [1, 4])
def test_a_training_step_with_scans_compiles_whole_and_matches_numpy(length: int) -> None:
    w0 = np.random.default_rng(0).standard_normal((3, 3)) * 0.5

    def build(flag: bool) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
        w = Variable("w", w0.copy())
        program, feeds = _rnn_program(length, w)
        return program, feeds, [w]

    got, want, fn = _run_both(build, runs=2)
    assert fn.whole_step_active(), fn.step_declined
    assert "for t" in fn.step_plan.source  # the time loops are in the kernel
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_each_time_loop_is_a_function_of_its_own_reading_the_steps_values() -> None:
    """Each scan's time loop is a function of its own that the step calls (LLVM
    optimises a short function better than one long one); a 0-d value the step
    computes before the loop (a scale from the inputs) reaches it through the work
    buffer. Same results as the numpy path."""
    w0 = np.random.default_rng(2).standard_normal((3, 3)) * 0.5
    xs0 = np.random.default_rng(3).standard_normal((3, 2, 3))

    def build(flag: bool) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
        w = Variable("w", w0.copy())
        g = Graph()
        xs = g.input("xs", (3, 2, 3), "float64", free=())
        wt = g.bind(w)
        scale = (xs * xs).mean()

        def rnn(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
            new = (h @ wt + x * scale).tanh()
            return new, new * scale

        last, ys = scan(rnn, xs[0] * 0.0, xs)
        loss = (ys * ys).mean() + last.sum() * scale
        (d_w,) = grad(loss, [wt])
        return compile([loss, d_w], {w: wt - 0.1 * d_w}), {"xs": xs0}, [w]

    got, want, fn = _run_both(build, runs=2)
    assert fn.whole_step_active(), fn.step_declined
    source = fn.step_plan.source
    loops = source.count("for t")
    assert loops >= 2  # the forward loop and its gradient's
    assert source.count("def _loop") == loops
    assert "for t" not in source.split("def step(")[1]  # the kernel only calls them
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_compiled_scan_gradients_equal_finite_differences() -> None:
    """float64: the compiled step's gradients with respect to ``xs`` and the captured
    weight against central differences of the numpy path's loss."""
    length = 3
    w0 = np.random.default_rng(1).standard_normal((3, 3)) * 0.5
    jit.set_enabled(True)
    w = Variable("w", w0.copy())
    program, feeds = _rnn_program(length, w)
    _, d_xs, d_w = program(feeds)
    assert _fn(program, feeds).whole_step_active()
    jit.set_enabled(False)
    probe = Variable("w", w0.copy())
    numpy_program, _ = _rnn_program(length, probe)

    def loss(xs: np.ndarray, wv: np.ndarray) -> float:
        probe.value = wv.copy()
        return float(numpy_program({"xs": xs, "h0": feeds["h0"]})[0])

    eps = 1e-6
    for arr, got, wrt_x in ((feeds["xs"], d_xs, True), (w0, d_w, False)):
        want = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            up, down = arr.copy(), arr.copy()
            up[i] += eps
            down[i] -= eps
            if wrt_x:
                want[i] = (loss(up, w0) - loss(down, w0)) / (2 * eps)
            else:
                want[i] = (loss(feeds["xs"], up) - loss(feeds["xs"], down)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def _recurrent(
    mode: str, length: int, layers: int, bidirectional: bool
) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
    """An Adam step of an LSTM or GRU (float64, batch 2, hidden 3)."""
    layer = nn.LSTM if mode == "lstm" else nn.GRU
    model = layer(4, 3, num_layers=layers, bidirectional=bidirectional, dtype="float64", rng=0)
    width = 6 if bidirectional else 3
    g = Graph()
    x = g.input("x", (length, 2, 4), "float64", free=())
    target = g.input("target", (length, 2, width), "float64", free=())
    out, _ = model(x)
    loss = ((out - target) * (out - target)).mean()
    step = nn.Adam(model.parameters(), lr=1e-2).compile(loss)
    rng = np.random.default_rng(length)
    feeds = {
        "x": rng.standard_normal((length, 2, 4)),
        "target": rng.standard_normal((length, 2, width)),
    }
    return step, feeds, [p for _, p in model.named_parameters()]


# Each compiles a Numba function of four loops: a minute or more on a loaded 2-core machine
# with a cold cache. The LSTM's tests run on one worker, one after the other, so that the
# second finds the step in the disk cache.
LSTM_STEP = pytest.mark.xdist_group("compiled_lstm_step")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "length", "layers", "bidirectional"),
    [pytest.param("lstm", 3, 1, True, marks=LSTM_STEP), ("gru", 1, 2, False)],
)
def test_lstm_and_gru_steps_compile_whole_and_train_as_on_numpy(
    mode: str, length: int, layers: int, bidirectional: bool
) -> None:
    got, want, fn = _run_both(lambda flag: _recurrent(mode, length, layers, bidirectional), runs=2)
    assert fn.whole_step_active(), fn.step_declined
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.slow
@LSTM_STEP
def test_an_lstm_step_runs_no_loop_body_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole step holds the time loops: the numpy ``scan`` kernel, which runs a
    body's program once per time step, is never called."""
    jit.set_enabled(True)
    step, feeds, _ = _recurrent("lstm", 3, 1, True)  # the disk cache has it after the above
    step(feeds)  # compiles the whole step
    fn = _fn(step, feeds)
    assert fn.whole_step_active(), fn.step_declined

    def no_body_program(self: Body) -> Any:
        raise AssertionError(f"{self.describe()} ran as a program of its own")

    monkeypatch.setattr(Body, "executable", no_body_program)
    losses = [float(step(feeds)[0]) for _ in range(3)]
    assert losses[2] < losses[0]  # it trains
    assert fn.step_plan.source.count("for t") == 4  # 2 directions x (forward, backward)


def test_a_body_op_without_a_numba_lowering_keeps_the_numpy_function() -> None:
    """``cumsum`` has no whole-step lowering: the step says which op, in which body."""

    def build(flag: bool) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
        w = Variable("w", np.full(3, 0.5))
        g = Graph()
        xs = g.input("xs", (4, 3), "float64", free=())
        wt = g.bind(w)

        def prefix(c: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
            new = (c + x * wt).cumsum(axis=0)
            return new, new

        _, ys = scan(prefix, xs[0] * 0.0, xs)
        loss = (ys * ys).sum()
        (d_w,) = grad(loss, [wt])
        program = compile([loss], {w: wt - 0.01 * d_w})
        return program, {"xs": np.arange(12.0).reshape(4, 3) / 10}, [w]

    got, want, fn = _run_both(build, runs=2)
    assert not fn.whole_step_active()
    assert "'cumsum'" in fn.step_declined
    assert "loop body prefix" in fn.step_declined
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_loop_step_too_large_to_win_keeps_the_numpy_function() -> None:
    jit.set_enabled(True)
    model = nn.LSTM(8, 256, rng=0)  # 278,528 operations a loop step
    g = Graph()
    x = g.input("x", (2, 16, 8), free=())
    out, _ = model(x)
    step = nn.Adam(model.parameters()).compile((out * out).mean())
    feeds = {"x": np.ones((2, 16, 8), np.float32)}
    step(feeds)
    fn = _fn(step, feeds)
    assert fn.step_plan is None
    assert "a loop step of more than" in fn.step_declined


@pytest.mark.slow
def test_a_loop_product_reads_its_transposed_weight_from_a_copy_made_before_the_loop() -> None:
    """An LSTM's recurrent product ``h @ W_hh.T`` (large enough for BLAS: batch 4,
    hidden 16) reads a contiguous copy of the weight that the step makes once, before
    the forward loop, instead of the transposed weight every step (BLAS took twice as
    long so). Same training as the numpy path."""
    pytest.importorskip("scipy")  # Numba's np.dot needs SciPy's BLAS
    model0 = nn.LSTM(8, 16, dtype="float32", rng=0)
    state = {k: np.array(v) for k, v in model0.state_dict().items()}
    rng = np.random.default_rng(4)
    feeds = {
        "x": rng.standard_normal((5, 4, 8)).astype(np.float32),
        "target": rng.standard_normal((5, 4, 16)).astype(np.float32),
    }

    def build(flag: bool) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
        model = nn.LSTM(8, 16, dtype="float32", rng=0)
        model.load_state_dict(state)
        g = Graph()
        x = g.input("x", (5, 4, 8), "float32", free=())
        target = g.input("target", (5, 4, 16), "float32", free=())
        out, _ = model(x)
        loss = ((out - target) * (out - target)).mean()
        step = nn.Adam(model.parameters(), lr=1e-2).compile(loss)
        return step, feeds, [p for _, p in model.named_parameters()]

    got, want, fn = _run_both(build, runs=2)
    assert fn.whole_step_active(), fn.step_declined
    source = fn.step_plan.source
    loops = [part.split("\n\n")[0] for part in source.split("def _loop")[1:]]
    dots = [line for part in loops for line in part.splitlines() if "np.dot(" in line]
    assert len(dots) == 2, "\n".join(dots)  # the forward product and the backward one
    assert not [d for d in dots if ".T," in d.replace(".T.T,", ",")], "\n".join(dots)
    kernel = source.split("def step(")[1]
    first_call = kernel.index("_loop")
    assert "S_float32[" in kernel[:first_call]  # the weight's copy, before the loop
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@pytest.mark.slow
def test_both_bias_gradients_of_an_lstm_are_one_sum_in_the_whole_step() -> None:
    """b_ih's and b_hh's gradients are the same sum of the gates' gradient over the
    steps and the batch (``sum_to_like`` against two biases of one shape): the whole
    step sums once and reads it for both. Same training as the numpy path."""

    def build(flag: bool) -> tuple[Program, dict[str, np.ndarray], list[Variable]]:
        return _recurrent("lstm", 3, 1, False)

    got, want, fn = _run_both(build, runs=2)
    assert fn.whole_step_active(), fn.step_declined
    source = fn.step_plan.source.split("def step(")[1]
    row_sums = [
        line.strip()
        for line in source.splitlines()
        if (m := re.match(r"\s*(W_float64\[\d+ \+ \w+\]) = (.*)", line))
        and m.group(2).startswith(m.group(1) + " + ")
    ]
    assert len(row_sums) == 1, "\n".join(row_sums)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
