"""A plan's input and constant buffers are never buffers that its kernels write.

Regression: the plan bound an input when the schedule reached it, so the pool could
hand it the buffer of a value that died earlier (``x * x`` below, once the sum had
read it); the run uploads inputs before any kernel, so the kernel that made that value
then overwrote the input, and ``x * sum(x * x) * y`` read ``x * x`` for ``y``.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, compile, evaluate
from asgrad.tensor.api.functional import size_ratio

pytestmark = pytest.mark.gpu


def test_an_input_bound_after_a_dead_value_is_not_overwritten(device: Device) -> None:
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (3, 5), free=())
    y = g.input("y", (3, 5), free=())
    out = x * (x * x).sum(axis=1, keepdims=True) * y
    program = compile([out], backend="gpu")
    for _ in range(2):  # the first run and a replay
        a, b = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
        (got,) = program({"x": a, "y": b})
        np.testing.assert_allclose(got, a * (a * a).sum(1, keepdims=True) * b, rtol=1e-5)


def test_a_size_constant_made_late_survives_replays(device: Device) -> None:
    rng = np.random.default_rng(1)
    g = Graph()
    x = g.input("x", (4, 6))
    z = g.input("z", (4, 6))
    squares = (x * x).sum(axis=1)  # a value that dies before the constant is made
    total = squares.sum() * size_ratio(z, z.sum(axis=0)) + z.sum()
    program = compile([total], backend="gpu")
    for _ in range(3):
        a, c = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
        (got,) = program({"x": a, "z": c})
        np.testing.assert_allclose(got, (a * a).sum() * 4 + c.sum(), rtol=1e-5)


def test_an_input_scheduled_late_keeps_its_uploaded_value(device: Device) -> None:
    # The pool could hand y the buffer of ``x * 2`` once the transpose had read it, and
    # the kernel making ``x * 2`` then wrote over y's upload (einsum's expansion met it).
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 6, 5)).astype(np.float32)
    b = rng.standard_normal((1, 3)).astype(np.float32)
    g = Graph()
    x = g.input("x", a.shape, free=())
    y = g.input("y", b.shape, free=())
    out = (x * 2.0).reshape(2, 3, 5).transpose(0, 2, 1).reshape(1, 10, 3) + y
    (got,) = evaluate([out], {"x": a, "y": b}, backend="gpu")
    want = (a * 2.0).reshape(2, 3, 5).transpose(0, 2, 1).reshape(1, 10, 3) + b
    np.testing.assert_allclose(got, want, rtol=1e-6)
