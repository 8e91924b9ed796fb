"""GradScaler on the GPU: the scaled, gated step in the compiled GPU program.

The same hand-computed sequence as the CPU tests (packages/nn/tests/test_grad_scaler.py):
the scale backs off on an infinite or NaN gradient and grows after ``growth_interval``
clean steps, a skipped step changes no parameter and no optimizer state, and the
clean steps match an unscaled GPU run. The gated update stays one multi-tensor
update dispatch, the gated moments in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Program, Variable

pytestmark = pytest.mark.gpu

# init_scale=4, growth_interval=3 (torch.amp.GradScaler's rule, worked by hand)
PATTERN = ["c", "c", "c", "c", "inf", "c", "nan", "c", "c", "c", "c"]
SCALES = [4.0, 4.0, 8.0, 8.0, 4.0, 4.0, 2.0, 2.0, 2.0, 4.0, 4.0]
TRACKERS = [1, 2, 0, 1, 0, 1, 0, 1, 2, 0, 1]

OPTIMIZERS: dict[str, Callable[[list[Variable]], nn.Optimizer]] = {
    "sgd-momentum": lambda ps: nn.SGD(ps, lr=0.125, momentum=0.5),
    "adam": lambda ps: nn.Adam(ps, lr=0.0625),
    "adamw-clip": lambda ps: nn.AdamW(ps, lr=0.0625, clip_grad_norm=0.5),
}


def _step(
    factory: Callable[[list[Variable]], nn.Optimizer], scaler: nn.GradScaler | None
) -> tuple[list[Variable], nn.Optimizer, Program]:
    w = Variable("w", np.array([0.5, -1.25, 2.0], np.float32))
    b = Variable("b", np.array([0.25, 0.75, -0.5], np.float32))
    g = Graph()
    x, y = g.input("x", (3,)), g.input("y", (3,))
    loss = ((w * x + b - y) ** 2).mean()
    opt = factory([w, b])
    step = opt.compile(loss if scaler is None else scaler.scale(loss), backend="gpu")
    return [w, b], opt, step


def _feeds(kind: str, k: int) -> dict[str, np.ndarray]:
    x = np.array([1.0, 0.5 + 0.125 * k, -2.0], np.float32)
    y = np.array([0.5, -0.25 * k, 1.0], np.float32)
    if kind == "inf":
        x = np.array([np.inf, 1.0, -np.inf], np.float32)
    if kind == "nan":
        y = np.array([np.nan, 0.0, 0.0], np.float32)
    return {"x": x, "y": y}


def _state(opt: nn.Optimizer) -> dict[str, Any]:
    return {k: v for k, v in opt.state_dict().items() if not k.startswith("grad_scaler.")}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_gpu_scaled_steps_follow_torchs_scale_sequence_and_skip_exactly(
    device: Device, name: str
) -> None:
    scaler = nn.GradScaler(init_scale=4.0, growth_interval=3)
    params, opt, step = _step(OPTIMIZERS[name], scaler)
    twin_params, twin_opt, twin = _step(OPTIMIZERS[name], None)
    for k, (kind, scale, tracker) in enumerate(zip(PATTERN, SCALES, TRACKERS, strict=True)):
        before = [p.value.copy() for p in params]
        before_state = _state(opt)
        step(_feeds(kind, k))
        assert scaler.get_scale() == scale, k
        assert scaler.get_growth_tracker() == tracker, k
        if kind == "c":
            twin(_feeds(kind, k))
        else:
            for p, old in zip(params, before, strict=True):
                assert p.value.tobytes() == old.tobytes(), k
            for key, value in _state(opt).items():
                assert np.array_equal(value, before_state[key]), (k, key)
        for p, q in zip(params, twin_params, strict=True):
            # the gated kernel and the plain one are different WGSL, which a driver
            # may contract into fused multiply-adds differently: a few ulps at most
            np.testing.assert_array_max_ulp(p.value, q.value, maxulp=4)
    assert int(opt.step_count.value) == PATTERN.count("c") == int(twin_opt.step_count.value)


def test_the_gated_adam_update_stays_one_multi_tensor_dispatch(device: Device) -> None:
    model = nn.Sequential(
        nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4)
    )
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (8, 20)), g.input("y", (8,), "int64")
    scaler = nn.GradScaler()
    opt = nn.Adam(model.parameters())
    program = opt.compile(scaler.scale(nn.cross_entropy(model(x), y)), backend="gpu")
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((8, 20)).astype(np.float32),
        "y": rng.integers(0, 4, 8).astype(np.int64),
    }
    kinds = count_kinds(build_plan(program.schedule, feeds, device).commands)
    assert kinds["optimizer update"] == 1, kinds
    # measured on lavapipe when pinned: 32 (24 without the scaler; 35 while the bias
    # gradients the checks read were column reductions of their own, 51 while found_inf
    # was an isfinite kernel, a sum and a comparison per gradient; 75 before update
    # chains took interior rules). The rest of the difference: found_inf's fill and
    # checks (`asgrad.gpu.plan.multi_finite`), the step counter's, scale's and
    # tracker's rules, and two of them copied into their variables (the batch reads
    # the old scale, so it is not written in place)
    assert sum(kinds.values()) <= 32, kinds
    # the bias gradients are summed with the batch, as without the scaler: the checks
    # and the update read their partial sums
    assert kinds["gradient sums"] == 1, kinds
    assert kinds["column reduction"] == 0, kinds
    assert kinds["checks"] == 1, kinds  # 6 gradients (binding limit: 7 buffers a kernel)
    assert kinds["copy"] <= 2, kinds
    program(feeds)
    assert scaler.get_growth_tracker() == 1
