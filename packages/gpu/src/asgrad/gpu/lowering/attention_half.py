"""Attention of a float16 graph as one kernel: ``cast16(softmax(cast32(score(q k^T)))) v``.

The mixed precision pass (`asgrad.tensor.api.precision`) writes attention as float16
products around a float32 softmax: the scores are rounded to float16 by their product
and by each op of the chain after it (scale, mask), widened for the softmax, and the
probabilities are rounded to float16 before the product with v. An online softmax
cannot round the normalised probabilities (it normalises at the end), so
`attention_forward_half` launches ``kernels/attention_forward_f16.wgsl``, which takes
two passes over the keys: each row's max and sum of exponentials in f32, then the
probabilities ``exp(s - max) / sum`` (the float32 softmax's arithmetic) rounded to f16
and multiplied by v with f32 accumulation, the output rounded to f16 once. The
operands, sizes and limits are `asgrad.gpu.lowering.attention`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import kernel_text, render
from asgrad.gpu.lowering.attention import (
    _O,
    _SIDE,
    K_TILE,
    Q_TILE,
    V_TILE,
    AttentionOperands,
    _check,
    _common,
    _contiguous,
    _head_tile,
    _inputs,
    _meta,
    _side_bindings,
    load_block,
)
from asgrad.gpu.lowering.scalar import render_wgsl_lets, simplify
from asgrad.tensor.ir.scalar import Expr

__all__ = ["WGSL_FILES", "attention_forward_half", "storage_buffers_half"]

WGSL_FILES: tuple[str, ...] = ("attention_forward_f16.wgsl", "prelude.wgsl")

_BUFFERS = 4  # q, k^T, v, the output
# pass 1 reads the keys alone, pass 2 the keys and the values
_LOADS = "\n\n".join(
    [
        load_block("load_q", "BM", "mu(0u)", [Q_TILE]),
        load_block("load_kv", "BN", "mu(1u)", [K_TILE, replace(V_TILE, optional=True)]),
    ]
)


def storage_buffers_half(sides: int) -> int:
    """Storage buffers `attention_forward_half` binds."""
    return _BUFFERS + sides


def _chain_half(expr: Expr, types: Sequence[str]) -> str:
    """``fn score(x: f16, i: u32, j: u32) -> f32``: the chain ``expr`` over the float16
    score x and the sides at (i, j), each op computing in its node's type (rounding to
    f16 as a float16 node does) and the last one's of float32."""
    lets, body = render_wgsl_lets(
        simplify(expr), ["x", *(f"y{k}" for k in range(len(types)))], ["f16", *types], "f32"
    )
    loads = [
        f"    let y{k} = side{k}[at({_SIDE + k}u, i, j)];"
        for k in range(len(types))
        if f"y{k}" in body or any(f"y{k}" in s for s in lets)
    ]
    return "\n".join(
        [
            "fn score(x: f16, i: u32, j: u32) -> f32 {",
            *loads,
            *(f"    {s}" for s in lets),
            f"    return {body};",
            "}",
        ]
    )


def attention_forward_half(ops: AttentionOperands, score: Expr) -> GpuArray:
    """The float16 output ``cast16(softmax(score(q k^T))) v`` of shape
    ``(*lead, L, Ev)``; ``score`` is the chain from the score rounded to float16
    (``arg(0)``) to the softmax's float32 input, over ``arg(1 + k)`` (side k)."""
    _check(ops)
    operands, slots = _inputs(ops)
    device = operands[0].array.device
    out_shape = (*ops.lead, ops.length, ops.value_head)
    out = GpuArray.empty(out_shape, np.float16, device)
    blocks = -(-ops.length // 16) * ops.batch
    if blocks == 0:
        return out
    slots[_O] = _contiguous(out_shape)
    inputs = tuple(op.array.wgsl for op in operands[:3])
    types = tuple(op.array.wgsl for op in operands[3:])
    chains = _chain_half(score, types)
    dm = _head_tile(ops)

    def source() -> str:
        return render(
            "attention_forward_f16",
            PRELUDE=kernel_text("prelude"),
            COMMON=_common(types),
            SIDES=_side_bindings(types, 1 + _BUFFERS),
            CHAINS=chains,
            LOADS=_LOADS,
            QT=inputs[0],
            KT=inputs[1],
            VT=inputs[2],
            OT="f16",  # substituted: the kernel files name no f16 themselves
            DM=dm,
            D4=dm // 4,
            D4P=dm // 4 + 1,
        )

    pipe = device.pipeline(
        ("attention_forward_f16", dm, chains, inputs, types),
        source,
        ("uniform",) + ("read",) * 3 + ("write",) + ("read",) * len(types),
    )
    params = device.params(_meta(ops, slots))
    buffers = (
        params,
        *(op.array.buffer for op in operands[:3]),
        out.buffer,
        *(op.array.buffer for op in operands[3:]),
    )
    device.dispatch(pipe, buffers, fold_groups(blocks, device.max_groups))
    return out
