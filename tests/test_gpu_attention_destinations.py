"""The fused attention kernels write their outputs where the views reading them put
them (asgrad.gpu.plan.destinations): heads merged back by a transpose and a reshape,
and dq, dk and dv scattered into the gradient of the qkv they were sliced from, with
no copy launched; where the views do not allow it the plan copies as before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device, to_gpu
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.attention import AttentionOperands, attention_forward
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile, evaluate
from asgrad.tensor.ir.scalar import arg

pytestmark = pytest.mark.gpu

B, T, H, DH = 2, 19, 3, 4  # T not a multiple of the kernels' blocks
D = H * DH


def _heads(x: Tensor) -> Tensor:
    return x.reshape(B, T, H, DH).transpose(0, 2, 1, 3)


def _step(v_apart: bool) -> tuple[list[Tensor], dict[str, np.ndarray]]:
    """A causal self-attention over heads sliced from one qkv (v from its own input
    when ``v_apart``), merged back and projected; the loss's gradients."""
    rng = np.random.default_rng(3)
    g = Graph()
    feeds = {
        "qkv": rng.standard_normal((B, T, 3 * D)).astype(np.float32),
        "v": rng.standard_normal((B, T, D)).astype(np.float32),
        "w": rng.standard_normal((D, D)).astype(np.float32),
        "c": rng.standard_normal((B, T, D)).astype(np.float32),
    }
    qkv, w, c = g.input("qkv", (B, T, 3 * D)), g.input("w", (D, D)), g.input("c", (B, T, D))
    q, k, v = (_heads(qkv[:, :, i * D : (i + 1) * D]) for i in range(3))
    inputs = [qkv, w]
    if v_apart:
        v_in = g.input("v", (B, T, D))
        v, inputs = _heads(v_in), [qkv, w, v_in]
    else:
        feeds.pop("v")
    mask = np.triu(np.full((T, T), -1e9, dtype=np.float32), 1)
    att = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(DH)) + g.constant(mask)
    y = (att.softmax(-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = y @ w
    loss = (out * c).sum()
    return [out, *grad(loss, inputs)], feeds


def _run(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> Any:
    program = compile(outs, backend="gpu")
    got = program(feeds)
    want = evaluate(outs, feeds, backend="cpu")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    schedule = program.executable.schedule  # type: ignore[attr-defined]  # the GPU's
    return count_kinds(build_plan(schedule, feeds, device).commands)


def test_merged_heads_and_qkv_gradients_are_written_in_place(device: Device) -> None:
    kinds = _run(*_step(v_apart=False), device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds
    assert kinds["view copy"] == 0, kinds  # before: the merge, and dq, dk, dv each copied


def test_gradients_that_do_not_cover_the_sum_are_copied_and_still_match(device: Device) -> None:
    kinds = _run(*_step(v_apart=True), device)
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds
    # q's and k's gradients fill two thirds of qkv's: the sum is zeros and copies
    assert kinds["view copy"] >= 1, kinds


def test_attention_forward_writes_through_a_strided_destination(device: Device) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3))
    ops = AttentionOperands(
        to_gpu(q, device),
        to_gpu(np.ascontiguousarray(k.transpose(0, 2, 1)), device),
        to_gpu(v, device),
        (),
        (2,),
        5,
        5,
        4,
        4,
    )
    plain, _ = attention_forward(ops, arg(0))
    merged = GpuArray.empty((5, 2, 4), np.float32, device)  # (L, heads, Ev): heads merged
    into = Operand.of(merged).permute((1, 0, 2))
    written, _ = attention_forward(ops, arg(0), into)
    assert written is into
    assert isinstance(plain, GpuArray)  # no destination given: a new array
    want = plain.numpy().transpose(1, 0, 2)
    np.testing.assert_allclose(merged.numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(GpuUnsupportedError, match="float32 view of shape"):
        attention_forward(ops, arg(0), Operand.of(merged))  # (5, 2, 4), not (2, 5, 4)
