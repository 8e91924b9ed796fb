"""backend='gpu' through the core's compile/evaluate: plans, fusion, capture.

Training steps with gradients are tested in the root ``tests/test_gpu_training.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, GpuError, variable_store
from asgrad.gpu.device.buffers import ScopedPool
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.capture import capturing
from asgrad.tensor import Graph, Variable, compile, make_schedule

pytestmark = pytest.mark.gpu


def test_plans_are_cached_per_fed_shape(device: Device) -> None:
    g = Graph("shapes")
    x = g.input("x", (2, 4))
    program = compile([(x * 2.0).sum(axis=1)], backend="gpu")
    ones = np.ones((2, 4), np.float32)
    assert program(x=ones)[0].tolist() == [8.0, 8.0]
    dispatches = device.counter.dispatches
    assert program(x=ones * 2)[0].tolist() == [16.0, 16.0]
    assert device.counter.dispatches - dispatches <= 2  # replayed, not re-lowered


def test_an_elementwise_chain_is_one_kernel(device: Device) -> None:
    g = Graph("chain")
    x, y = g.input("x", (5, 3)), g.input("y", (3,))
    out = ((x * 2.0 + y).tanh() - x).relu()
    program = compile([out], backend="gpu")
    xv = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    yv = np.random.default_rng(1).standard_normal(3).astype(np.float32)
    program(x=xv, y=yv)
    before = device.counter.dispatches
    (got,) = program(x=xv, y=yv)
    assert device.counter.dispatches - before == 1
    np.testing.assert_allclose(got, np.maximum(np.tanh(xv * 2 + yv) - xv, 0), atol=1e-6)


def test_without_fusion_each_node_is_a_kernel(device: Device) -> None:
    g = Graph("unfused")
    x, y = g.input("x", (5, 3)), g.input("y", (3,))
    out = ((x * 2.0 + y).tanh() - x).relu()
    schedule = make_schedule([out])
    feeds = {"x": np.ones((5, 3), np.float32), "y": np.ones(3, np.float32)}
    assert len(build_plan(schedule, feeds, device).commands) == 1
    assert len(build_plan(schedule, feeds, device, fuse=False).commands) == 5


def test_an_update_rule_is_written_into_its_variable(device: Device) -> None:
    w = Variable("w", np.ones(4, np.float32))
    g = Graph("update")
    x = g.input("x", (4,))
    program = compile([], {w: g.parameter("w", variable=w) - x * 0.5}, backend="gpu")
    program(x=np.ones(4, np.float32))
    buffer = variable_store(device).array(w).buffer
    before = device.counter.dispatches
    program(x=np.ones(4, np.float32))
    assert device.counter.dispatches - before == 1  # the update itself, no copy
    assert variable_store(device).array(w).buffer is buffer
    np.testing.assert_array_equal(w.value, np.zeros(4, np.float32))


def test_captures_do_not_nest(device: Device) -> None:
    scope = ScopedPool(device.pool)
    with capturing(device, scope) as capture:
        with pytest.raises(GpuError, match="already in progress"), capturing(device, scope):
            pass
        assert device.current_pool is scope
    assert capture.commands == []
    assert device.capture is None
    scope.close()


def test_a_fixed_reshape_means_the_same_at_another_batch_size(device: Device) -> None:
    # Declared (3, 3) the reshape to (3, -1) is a no-op; fed (6, 3) it is not.
    g = Graph()
    x = g.input("x", (3, 3))
    program = compile([x.reshape(3, -1).sum(axis=1)], backend="gpu")
    fed = np.arange(18, dtype=np.float32).reshape(6, 3)
    (got,) = program({"x": fed})
    np.testing.assert_allclose(got, fed.reshape(3, -1).sum(axis=1), rtol=1e-6)


def test_the_plan_cache_is_bounded(device: Device) -> None:
    g = Graph()
    x = g.input("x", (1, 4))
    program = compile([(x * 3.0).sum(axis=1)], backend="gpu")
    limit = type(program.executable).MAX_PLANS  # type: ignore[attr-defined]
    for b in range(1, limit + 4):
        (got,) = program({"x": np.ones((b, 4), np.float32)})
        np.testing.assert_allclose(got, np.full(b, 12.0, np.float32))
    assert len(program.executable._plans) == limit  # type: ignore[attr-defined]
