"""The CPU executor's shape-specialised code: same values as the kernels, node by node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

import asgrad.tensor.cpu_backend as executor_module
from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, Variable, compile, get_op, make_schedule
from asgrad.tensor.executor import CPUExecutable, Schedule


def _interpret(schedule: Schedule, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The reference: every node through its registered kernel, nothing specialised."""
    values: dict[int, Any] = {}
    for node in schedule.nodes:
        if node.op == "input":
            values[node.id] = feeds[node.name]
        elif node.op == "parameter":
            values[node.id] = node.attrs["variable"].value
        elif node.op == "constant":
            values[node.id] = node.attrs["value"]
        else:
            args = [values[n.id] for n in node.inputs]
            values[node.id] = get_op(node.op).kernel(*args, **node.attrs)
    return [
        np.asarray(values[n.id]) for n in [*schedule.outputs, *(n for _, n in schedule.updates)]
    ]


def _check(outputs: Sequence[Tensor], feeds_list: Sequence[dict[str, np.ndarray]]) -> None:
    schedule = make_schedule(outputs)
    exe = CPUExecutable(schedule)
    for feeds in feeds_list:
        expected = _interpret(schedule, feeds)
        got = exe.run(feeds)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert isinstance(g, np.ndarray)
            assert g.shape == e.shape
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _linear_model(batch: int, seq: int) -> tuple[list[Tensor], Graph]:
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (batch, seq, 6))
    w = g.parameter("w", variable=Variable("w", rng.standard_normal((6, 5)).astype(np.float32)))
    b = g.parameter("b", variable=Variable("b", rng.standard_normal((5,)).astype(np.float32)))
    h = (x @ w + b).relu()
    loss = (h * h).mean() + h.max(axis=-1).sum() * 0.1 + (h / 3.0).min(axis=(0, 1)).mean()
    gw, gb, gx = grad(loss, [w, b, x])
    return [loss, gw, gb, gx, h.reshape(-1, 5).transpose(), h.sum(axis=1, keepdims=True)], g


def test_batched_linear_and_its_gradients_match_the_kernels() -> None:
    outputs, _ = _linear_model(4, 3)
    rng = np.random.default_rng(1)
    _check(
        outputs,
        [
            {"x": rng.standard_normal((4, 3, 6)).astype(np.float32)},
            {"x": rng.standard_normal((9, 3, 6)).astype(np.float32)},
            {"x": rng.standard_normal((1, 3, 6)).astype(np.float32)},
        ],
    )


def test_a_batch_declared_one_may_grow() -> None:
    # Static types say the *_like ops are identities; fed 5 rows, they are not.
    outputs, _ = _linear_model(1, 1)
    rng = np.random.default_rng(2)
    _check(
        outputs,
        [
            {"x": rng.standard_normal((1, 1, 6)).astype(np.float32)},
            {"x": rng.standard_normal((5, 7, 6)).astype(np.float32)},
        ],
    )


def test_weight_gradient_of_a_batched_product_is_one_product() -> None:
    outputs, _ = _linear_model(4, 3)
    exe = CPUExecutable(make_schedule(outputs))
    exe.run({"x": np.ones((4, 3, 6), np.float32)})
    (fn,) = exe._fns.values()
    assert "_matmul_batch_sum(" in fn.source
    assert ".reshape(12, 6)" in fn.source  # (4, 3, 6) @ (6, 5) as one (12, 6) @ (6, 5)


def test_shape_only_values_fold_to_constants() -> None:
    g = Graph()
    x = g.input("x", (3, 4))
    (gx,) = grad((x * x).mean(), [x])
    exe = CPUExecutable(make_schedule([gx]))
    value = exe.run({"x": np.full((3, 4), 2.0, np.float32)})[0]
    np.testing.assert_allclose(value, np.full((3, 4), 2 * 2.0 / 12, np.float32), rtol=1e-6)
    (fn,) = exe._fns.values()
    for kernel_name in ("size_ratio", "broadcast_like"):
        assert kernel_name not in fn.source


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
    control = executor_module._blas()
    if control.set is None:
        pytest.skip("threadpoolctl cannot reach numpy's BLAS here")
    before = control.get()
    g = Graph()
    x = g.input("x", (64, 200))
    w = g.parameter("w", variable=Variable("w", np.ones((200, 100), np.float32)))
    out = (x @ w).sum()
    feeds = {"x": np.ones((64, 200), np.float32)}
    default = compile([out])
    default(feeds)  # code is generated at the first run with given shapes
    monkeypatch.setattr(executor_module, "SERIAL_GEMM_FLOPS", 1 << 30)
    serial = compile([out])
    for program, switches in ((default, False), (serial, True)):
        (value,) = program(feeds)
        assert float(value) == 64 * 100 * 200
        assert control.get() == before
        assert isinstance(program.executable, CPUExecutable)
        (fn,) = program.executable._fns.values()
        assert ("_blas_set(1)" in fn.source) == switches
