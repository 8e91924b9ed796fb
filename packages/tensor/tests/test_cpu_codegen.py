"""The CPU backend's shape-specialised code: caching per shapes, constants, BLAS threads.

The value checks of whole training graphs against the kernels, node by node, need
gradients: ``packages/autograd/tests/test_cpu_backend_gradients.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, Variable, compile, make_schedule
from asgrad.tensor.cpu import CPUExecutable, blas


def test_each_input_shape_gets_its_own_function_and_the_cache_is_bounded() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    exe = CPUExecutable(make_schedule([(x * 2.0).sum(axis=0)]))
    for n in range(1, CPUExecutable.MAX_SPECIALIZATIONS + 3):
        out = exe.run({"x": np.ones((n, 3), np.float32)})[0]
        assert out.tolist() == [2.0 * n] * 3
    assert 0 < len(exe._fns) <= CPUExecutable.MAX_SPECIALIZATIONS


def test_constant_outputs_are_fresh_writable_arrays() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    zero_grad = g.apply("broadcast_like", (g.constant(0.0), x))
    program = compile([zero_grad, x.sum()])
    first = program({"x": np.ones((2, 3), np.float32)})[0]
    first[0, 0] = 5.0
    second = program({"x": np.ones((2, 3), np.float32)})[0]
    assert second.tolist() == [[0.0] * 3] * 2


def test_scalar_outputs_are_arrays_and_updates_apply() -> None:
    v = Variable("v", np.array([1.0, 2.0], np.float32))
    g = Graph()
    x = g.input("x", (2,))
    p = g.parameter("v", variable=v)
    loss = (p * x).sum()
    program = compile([loss], {v: p - x * 0.5})
    (out,) = program({"x": np.array([2.0, 2.0], np.float32)})
    assert isinstance(out, np.ndarray)
    assert out.shape == ()
    assert float(out) == pytest.approx(6.0)
    assert v.value.tolist() == [0.0, 1.0]


def test_serial_blas_is_opt_in_and_the_thread_count_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    control = blas.blas_threads()
    if control.set is None:
        pytest.skip("threadpoolctl cannot reach numpy's BLAS here")
    assert control.get is not None
    before = control.get()
    g = Graph()
    x = g.input("x", (64, 200))
    w = g.parameter("w", variable=Variable("w", np.ones((200, 100), np.float32)))
    out = (x @ w).sum()
    feeds = {"x": np.ones((64, 200), np.float32)}
    default = compile([out])
    default(feeds)  # code is generated at the first run with given shapes
    monkeypatch.setattr(blas, "SERIAL_GEMM_FLOPS", 1 << 30)
    serial = compile([out])
    for program, switches in ((default, False), (serial, True)):
        (value,) = program(feeds)
        assert float(value) == 64 * 100 * 200
        assert control.get() == before
        assert isinstance(program.executable, CPUExecutable)
        (fn,) = program.executable._fns.values()
        assert ("_blas_set(1)" in fn.source) == switches
