"""The tiered compiled path (asgrad.tensor.cpu.jit.tier): numpy first, compiled after a
step count that is the same in every run.

A program's first `TIER_UP_AT` steps run the numpy function (Numba not imported),
the later ones the compiled form; the switch follows the program's step counter when
it has one (so a resumed run switches at the same step), else its calls; the results
are those of a numpy-only run followed by a compiled-only one, bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, Program, Variable, compile, scan
from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.cpu.jit import JitUnavailableError
from asgrad.tensor.cpu.jit.tier import step_counter
from asgrad.tensor.errors import ArgumentError

pytest.importorskip("numba")

AT = 3  # steps on the numpy tier in these tests
X = np.array([0.5, -1.0, 2.0, 0.25], np.float32)


@pytest.fixture(autouse=True)
def _tiered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(jit, "TIER_UP_AT", AT)
    jit.set_enabled("lazy")
    yield
    jit.set_enabled(None)


def _step(w: Variable, counter: Variable | None = None) -> Program:
    """Gradient descent on sum((w * x - 1) ** 2), counting its steps in ``counter``."""
    g = Graph()
    x = g.input("x", (4,))
    wt = g.bind(w)
    r = wt * x - 1.0
    updates = {w: wt - 0.1 * (2.0 * r * x)}
    if counter is not None:
        updates[counter] = g.bind(counter) + 1.0
    return compile([(r * r).sum()], updates)


def _fn(program: Program) -> Any:
    assert isinstance(program.executable, CPUExecutable)
    return program.executable.function({"x": X})


def _losses(program: Program, n: int) -> list[np.ndarray]:
    return [program({"x": X})[0].copy() for _ in range(n)]


def test_the_first_steps_run_numpy_then_the_compiled_form() -> None:
    w = Variable("w", np.ones(4, np.float32))
    program = _step(w)
    fn = _fn(program)
    assert fn.tier() == "none"
    for _ in range(AT):
        program({"x": X})
        assert fn.tier() == "numpy"
        assert not fn.whole_step_active()
    assert "jk" not in fn.source
    assert fn.step_declined.startswith("not compiled yet")
    program({"x": X})
    assert fn.tier() == "compiled"
    assert fn.step_plan is not None
    assert fn.whole_step_active(), fn.step_declined


def test_a_tiered_run_is_a_numpy_run_then_a_compiled_run_bit_for_bit() -> None:
    w = Variable("w", np.full(4, 0.3, np.float32))
    tiered = _losses(_step(w), 2 * AT)
    tiered_w = w.value.copy()

    w.value = np.full(4, 0.3, np.float32)
    jit.set_enabled(False)
    reference = _losses(_step(w), AT)
    jit.set_enabled(True)
    reference += _losses(_step(w), AT)

    np.testing.assert_array_equal(np.array(tiered), np.array(reference))
    np.testing.assert_array_equal(tiered_w, w.value)


def test_a_step_counter_decides_the_tier_so_a_resumed_run_switches_at_the_same_step() -> None:
    w = Variable("w", np.full(4, 0.3, np.float32))
    counter = Variable("step", np.array(0.0), trainable=False)
    program = _step(w, counter)
    assert step_counter(program.schedule) is counter
    uninterrupted = _losses(program, 2 * AT)

    # saved after step 1 (numpy) and after step AT + 1 (compiled), resumed by a fresh
    # program on fresh variables holding the saved values
    for saved in (1, AT + 1):
        w.value, counter.value = np.full(4, 0.3, np.float32), np.array(0.0)
        _losses(_step(w, counter), saved)
        w2 = Variable("w", w.value.copy())
        counter2 = Variable("step", counter.value.copy(), trainable=False)
        resumed = _step(w2, counter2)
        got = _losses(resumed, 2 * AT - saved)
        np.testing.assert_array_equal(np.array(got), np.array(uninterrupted[saved:]))
        assert _fn(resumed).tier() == "compiled"


def test_a_program_without_a_counter_counts_its_calls() -> None:
    w = Variable("w", np.ones(4, np.float32))
    counter = Variable("step", np.array(5.0), trainable=False)
    g = Graph()
    doubled = {counter: g.bind(counter) * 2.0}  # updated, but not counting
    assert step_counter(compile([g.bind(w).sum()], doubled).schedule) is None
    program = _step(w)
    assert step_counter(program.schedule) is None
    fn = _fn(program)
    tiers = []
    for _ in range(AT + 2):
        program({"x": X})
        tiers.append(fn.tier())
    assert tiers == ["numpy"] * AT + ["compiled"] * 2


def _calls_compiled_code(source: str) -> bool:
    """Whether a generated function's lines call compiled kernels or segments."""
    return "= jk" in source or "= _segment" in source


def test_an_evaluation_tiers_up_by_its_calls() -> None:
    g = Graph()
    x = g.input("x", (4,))
    program = compile([(x * 2.0).gelu().softmax(-1)])
    fn = _fn(program)
    results = [program({"x": X})[0] for _ in range(AT + 1)]
    assert fn.tier() == "compiled"
    assert _calls_compiled_code(fn.source)
    np.testing.assert_allclose(results[-1], results[0], rtol=1e-5, atol=1e-6)


def test_a_loop_body_runs_on_the_tier_of_its_program() -> None:
    g = Graph()
    h0, xs = g.input("h0", (8,)), g.input("xs", (3, 8), free=())
    h, _ = scan(lambda h, x: ((h * 0.5 + x).gelu() * 2.0, None), h0, xs)
    program = compile([h])
    (node,) = [n for n in program.schedule.nodes if n.op == "scan"]
    feeds = {"h0": X.repeat(2), "xs": np.ones((3, 8), np.float32)}
    results = [program(feeds)[0] for _ in range(AT)]
    body = node.attrs["loop"].executable()
    assert [_calls_compiled_code(fn.source) for fn in body._fns.values()] == [False]
    results.append(program(feeds)[0])
    assert [_calls_compiled_code(fn.source) for fn in body._fns.values()] == [False, True]
    np.testing.assert_allclose(results[-1], results[0], rtol=1e-5, atol=1e-6)


def test_a_compiled_form_that_cannot_be_built_leaves_numpy_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: CPUExecutable, types: Any, shapes: Any) -> Any:
        raise JitUnavailableError("Numba is broken here")

    monkeypatch.setattr(CPUExecutable, "_compiled", broken)
    w = Variable("w", np.ones(4, np.float32))
    program = _step(w)
    _losses(program, AT)
    with pytest.warns(RuntimeWarning, match="Numba is broken here"):
        program({"x": X})
    fn = _fn(program)
    assert fn.tier() == "numpy"
    assert "Numba is broken here" in fn.tier_declined
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        program({"x": X})


def test_the_setting_reads_0_1_lazy_and_defaults_to_tiered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jit.set_enabled(None)
    for value, expected in (("0", "off"), ("1", "on"), ("lazy", "lazy"), ("auto", "lazy")):
        monkeypatch.setenv("ASGRAD_CPU_JIT", value)
        assert jit.mode() == expected
    monkeypatch.delenv("ASGRAD_CPU_JIT")
    assert jit.mode() == "lazy"
    monkeypatch.setattr(jit, "installed", lambda: False)
    assert jit.mode() == "off"  # the default without Numba: numpy
    monkeypatch.setenv("ASGRAD_CPU_JIT", "lazy")
    with pytest.raises(JitUnavailableError, match="ASGRAD_CPU_JIT=0"):
        jit.mode()
    with pytest.raises(ArgumentError, match="'lazy'"):
        jit.set_enabled("yes")  # type: ignore[arg-type]  # the wrong value under test


def test_the_numpy_tier_imports_no_numba(tmp_path: Any) -> None:
    code = (
        "import sys\n"
        "import numpy as np\n"
        "import asgrad.tensor as at\n"
        "from asgrad.tensor.cpu import jit\n"
        "w = at.Variable('w', np.ones(4, np.float32))\n"
        "g = at.Graph(); x = g.input('x', (4,)); r = (g.bind(w) * x - 1.0).gelu()\n"
        "step = at.compile([(r * r).sum()], {w: g.bind(w) - 0.1 * r})\n"
        "for _ in range(5): step({'x': np.ones(4, np.float32)})\n"
        "at.evaluate([r.softmax(-1)], {'x': np.ones(4, np.float32)})\n"
        "print(jit.mode(), 'numba' in sys.modules)\n"
    )
    env = {**os.environ, "ASGRAD_CACHE_DIR": str(tmp_path)}
    env.pop("ASGRAD_CPU_JIT", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["lazy", "False"]
