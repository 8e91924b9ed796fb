"""Attention as one kernel: ``softmax(score(q k^T)) v`` and its gradients, FlashAttention-style.

`attention_forward` launches ``kernels/attention_forward.wgsl``: each workgroup owns a
block of query rows of one batch-head and streams key and value blocks through
workgroup memory with an online softmax (running max and sum in f32), so the scores
and probabilities are never stored; it writes the output and each row's log-sum-exp.
`attention_backward` launches FlashAttention-2's backward as two kernels: the query
side (``attention_backward_q.wgsl``: dQ, and each row's ``D = dO . O``) and then the
key side (``attention_backward_kv.wgsl``: dK and dV), both recomputing the
probabilities from the saved log-sum-exp.

``score`` is the elementwise chain between the product and the softmax (a scale, an
additive or a where mask, a bias), and ``grad`` the chain autograd made of it for the
scores' gradient; both are scalar expressions (`asgrad.tensor.ir.scalar`) over
``arg(0)`` (the score, or the gradient) and ``arg(1 + k)``: side operand k, read at
the score's (batch-head, row, column) through broadcast strides. The plan finds the
pattern and builds them (`asgrad.gpu.plan.attention`).

Operands may be strided views with up to `MAX_LEAD` batch axes; the head sizes (q's
and v's last axes) are at most `MAX_HEAD` (the tiles fit WebGPU's 16 KiB of workgroup
memory).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.source import kernel_text, render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.scalar import render_wgsl_lets, simplify
from asgrad.tensor.ir.scalar import Expr

__all__ = [
    "DO_TILE",
    "K_TILE",
    "MAX_HEAD",
    "MAX_LEAD",
    "MAX_SIDES",
    "Q_TILE",
    "V_TILE",
    "WGSL_FILES",
    "AttentionOperands",
    "BlockTile",
    "attention_backward",
    "attention_forward",
    "load_block",
    "storage_buffers",
]

WGSL_FILES: tuple[str, ...] = (
    "attention_forward.wgsl",
    "attention_backward_q.wgsl",
    "attention_backward_kv.wgsl",
    "prelude.wgsl",
)

MAX_HEAD = 64  # q's, k's and v's last axis: the tiles' width in workgroup memory
MAX_LEAD = 4  # batch axes (batch, heads...) of the scores
MAX_SIDES = 8  # operands of the score and gradient chains (masks, biases)

# Operand slots of the uniform: their strides and offsets.
_Q, _KT, _V, _O, _DO, _DQ, _DKT, _DV, _SIDE = range(9)
_HEADER = 12  # words before the slots: sizes, block counts, the batch axes' sizes
_SLOT = 8  # words per slot: MAX_LEAD batch strides, row and column strides, offset
_WORDS = 4 * 36  # the uniform's size in u32 words (vec4 array of 36)
_FORWARD_BUFFERS = 5  # q, k^T, v, the output, the statistics
_BACKWARD_BUFFERS = 7  # q, k^T, v, o or dO, dO or the statistics, two gradients


def storage_buffers(sides: int, backward: bool) -> int:
    """Storage buffers a launch binds (the device allows a limited number per kernel)."""
    return (_BACKWARD_BUFFERS if backward else _FORWARD_BUFFERS) + sides


@dataclass(frozen=True)
class AttentionOperands:
    """The inputs of an attention: q ``(*lead, L, E)``, k^T ``(*lead, E, S)`` and v
    ``(*lead, S, Ev)`` (each broadcast to ``lead``), and the chains' side operands
    (each broadcast to the scores ``(*lead, L, S)``)."""

    q: GpuArray | Operand
    kt: GpuArray | Operand
    v: GpuArray | Operand
    sides: tuple[GpuArray | Operand, ...]
    lead: tuple[int, ...]
    length: int  # L
    source: int  # S
    head: int  # E
    value_head: int  # Ev

    @property
    def batch(self) -> int:
        return math.prod(self.lead)


def _operand(x: GpuArray | Operand, shape: tuple[int, ...]) -> tuple[Operand, list[int]]:
    """``x`` read over ``shape`` (``(*lead, rows, cols)``): the operand and its slot's
    words (batch strides padded to `MAX_LEAD`, row and column strides, offset)."""
    op = Operand.of(x)
    extra = len(op.shape) - len(shape)
    if extra > 0 and all(size == 1 for size in op.shape[:extra]):  # leading 1s dropped
        op = Operand(op.array, op.shape[extra:], op.strides[extra:], op.offset)
    strides = op.broadcast_strides(shape)
    if min(strides, default=0) < 0:
        raise GpuUnsupportedError("attention reads operands with non-negative strides only")
    lead = [0] * (MAX_LEAD - (len(shape) - 2)) + list(strides[:-2])
    return op, [*lead, strides[-2], strides[-1], op.offset, 0]


def _common(sides: Sequence[str]) -> str:
    """The uniform, its accessor, the per-workgroup base offsets and ``at``, and the
    side bindings' WGSL."""
    slots = _SIDE + len(sides)
    lines = [
        "struct Meta {",
        "    m: array<vec4<u32>, 36>,",
        "}",
        "@group(0) @binding(0) var<uniform> params: Meta;",
        "fn mu(i: u32) -> u32 {",
        "    return params.m[i / 4u][i % 4u];",
        "}",
        f"var<private> bases: array<u32, {slots}>;",
        "fn set_bases(bh: u32) {",
        f"    for (var s = 0u; s < {slots}u; s++) {{",
        f"        let w = {_HEADER}u + {_SLOT}u * s;",
        "        var rem = bh;",
        "        var o = mu(w + 6u);",
    ]
    for d in range(MAX_LEAD - 1, 0, -1):
        lines += [
            f"        o += (rem % mu({8 + d}u)) * mu(w + {d}u);",
            f"        rem = rem / mu({8 + d}u);",
        ]
    lines += [
        "        o += rem * mu(w);",
        "        bases[s] = o;",
        "    }",
        "}",
        "fn at(s: u32, r: u32, c: u32) -> u32 {",
        f"    let w = {_HEADER}u + {_SLOT}u * s;",
        "    return bases[s] + r * mu(w + 4u) + c * mu(w + 5u);",
        "}",
    ]
    return "\n".join(lines)


def _side_bindings(types: Sequence[str], first: int) -> str:
    return "\n".join(
        f"@group(0) @binding({first + k}) var<storage, read> side{k}: array<{t}>;"
        for k, t in enumerate(types)
    )


def _chain(name: str, expr: Expr, types: Sequence[str]) -> str:
    """``fn name(x: f32, i: u32, j: u32) -> f32``: ``expr`` over x and the sides at (i, j)."""
    lets, body = render_wgsl_lets(
        simplify(expr), ["x", *(f"y{k}" for k in range(len(types)))], ["f32", *types], "f32"
    )
    loads = [
        f"    let y{k} = side{k}[at({_SIDE + k}u, i, j)];"
        for k in range(len(types))
        if f"y{k}" in body or any(f"y{k}" in s for s in lets)
    ]
    return "\n".join(
        [
            f"fn {name}(x: f32, i: u32, j: u32) -> f32 {{",
            *loads,
            *(f"    {s}" for s in lets),
            f"    return {body};",
            "}",
        ]
    )


def _meta(ops: AttentionOperands, slots: dict[int, list[int]]) -> bytes:
    words = [0] * _WORDS
    words[0:4] = [ops.length, ops.source, ops.head, ops.value_head]
    words[4] = ops.batch
    words[5] = -(-ops.length // 16)  # query blocks of the forward and the query side
    words[6] = -(-ops.source // 16)  # key blocks of the key side
    lead = [1] * (MAX_LEAD - len(ops.lead)) + list(ops.lead)
    words[8:12] = lead
    for slot, values in slots.items():
        start = _HEADER + _SLOT * slot
        words[start : start + _SLOT] = values
    return struct.pack(f"<{_WORDS}I", *words)


def _check(ops: AttentionOperands) -> None:
    if max(ops.head, ops.value_head) > MAX_HEAD:
        raise GpuUnsupportedError(f"fused attention takes head sizes up to {MAX_HEAD}")
    if len(ops.lead) > MAX_LEAD or len(ops.sides) > MAX_SIDES:
        raise GpuUnsupportedError(
            f"fused attention takes up to {MAX_LEAD} batch axes and {MAX_SIDES} side operands"
        )


def _inputs(ops: AttentionOperands) -> tuple[list[Operand], dict[int, list[int]]]:
    lead, length, source = ops.lead, ops.length, ops.source
    shapes = {
        _Q: (*lead, length, ops.head),
        _KT: (*lead, ops.head, source),
        _V: (*lead, source, ops.value_head),
    }
    operands: list[Operand] = []
    slots: dict[int, list[int]] = {}
    for slot, x in ((_Q, ops.q), (_KT, ops.kt), (_V, ops.v)):
        op, words = _operand(x, shapes[slot])
        operands.append(op)
        slots[slot] = words
    for k, x in enumerate(ops.sides):
        op, words = _operand(x, (*lead, length, source))
        operands.append(op)
        slots[_SIDE + k] = words
    return operands, slots


def _contiguous(shape: tuple[int, ...]) -> list[int]:
    """The slot words of a contiguous ``(*lead, rows, cols)`` array."""
    lead, rows, cols = shape[:-2], shape[-2], shape[-1]
    batch_strides: list[int] = []
    step = rows * cols
    for size in reversed(lead):
        batch_strides.insert(0, step if size > 1 else 0)
        step *= size
    padded = [0] * (MAX_LEAD - len(lead)) + batch_strides
    return [*padded, cols, 1, 0, 0]


def _destination(
    into: Operand | None, shape: tuple[int, ...], device: Device
) -> tuple[GpuArray | Operand, list[int]]:
    """Where a kernel writes an output of ``shape``: a new contiguous array, or the
    view ``into``; and its slot's words."""
    if into is None:
        return GpuArray.empty(shape, np.float32, device), _contiguous(shape)
    if tuple(into.shape) != shape or into.array.dtype != np.float32:
        raise GpuUnsupportedError(
            f"attention writes a float32 view of shape {shape}, not {into.array.dtype} "
            f"{tuple(into.shape)}: pass a matching view, or None for a new array"
        )
    op, words = _operand(into, shape)
    if any(stride == 0 and size > 1 for size, stride in zip(op.shape, op.strides, strict=True)):
        raise GpuUnsupportedError("attention writes a view with no repeated elements only")
    return into, words


def _head_tile(ops: AttentionOperands) -> int:
    return 32 if max(ops.head, ops.value_head) <= 32 else 64


def _block(ops: AttentionOperands) -> int:
    """The backward's streamed block (query rows on the key side, keys on the query
    side): 16 where the head tile is 32 wide, 8 at 64, so the tiles fit 16 KiB."""
    return 16 if _head_tile(ops) == 32 else 8


@dataclass(frozen=True)
class BlockTile:
    """One workgroup tile that `load_block` fills: ``tile[r][e / 4][e % 4]`` holds the
    element ``read`` (a WGSL expression of ``row`` and ``e``) for ``e`` below ``width``
    (``"E"`` or ``"Ev"``), zero elsewhere; an ``optional`` tile is filled only when
    the function's ``values`` argument is true."""

    tile: str
    read: str
    width: str
    optional: bool = False


def load_block(name: str, rows: str, limit: str, tiles: Sequence[BlockTile]) -> str:
    """The WGSL function ``name(t, r0[, values])`` that the workgroup's 256 threads call
    to fill ``tiles`` with the ``rows`` (a constant's name) rows from ``r0``: rows at
    or past ``limit`` (a WGSL expression: L or S) and head elements past a tile's width
    are zeros, so the products over a whole tile need no bounds. Every attention kernel
    loads its query, gradient, key and value blocks through one of these."""
    optional = any(tile.optional for tile in tiles)
    lines = [
        f"fn {name}(t: u32, r0: u32{', values: bool' if optional else ''}) {{",
        "    let E = mu(2u);",
        "    let Ev = mu(3u);",
        f"    let n = {limit};",
        f"    for (var x = t; x < {rows} * DM; x += 256u) {{",
        "        let r = x / DM;  // rows read along the head axis (contiguous in q, k, v)",
        "        let e = x % DM;",
        "        let row = r0 + r;",
    ]
    for k, tile in enumerate(tiles):
        guard = f"values && e < {tile.width}" if tile.optional else f"e < {tile.width}"
        lines += [
            f"        var a{k} = 0.0;",
            f"        if (row < n && {guard}) {{",
            f"            a{k} = f32({tile.read});",
            "        }",
        ]
    for k, tile in enumerate(tiles):
        store = f"{tile.tile}[r][e / 4u][e % 4u] = a{k};"
        if tile.optional:
            lines += ["        if (values) {", f"            {store}", "        }"]
        else:
            lines.append(f"        {store}")
    return "\n".join([*lines, "    }", "}"])


Q_TILE = BlockTile("qs", "q[at(0u, row, e)]", "E")
"""The query rows (slot 0)."""
K_TILE = BlockTile("ks", "kt[at(1u, e, row)]", "E")
"""The keys, read through k^T (slot 1)."""
V_TILE = BlockTile("vs", "v[at(2u, row, e)]", "Ev")
"""The values (slot 2)."""
DO_TILE = BlockTile("dos", "dout[at(4u, row, e)]", "Ev")
"""The output gradient's rows (slot 4)."""


def _sources(name: str, ops: AttentionOperands, chains: str, side_first: int) -> str:
    """The WGSL of kernel ``name``."""
    dm = _head_tile(ops)
    types = [Operand.of(s).array.wgsl for s in ops.sides]
    block = _block(ops)
    if name == "attention_forward":
        loads = [
            load_block("load_q", "BM", "mu(0u)", [Q_TILE]),
            load_block("load_kv", "BN", "mu(1u)", [K_TILE, V_TILE]),
        ]
    elif name == "attention_backward_q":
        loads = [
            load_block("load_q", "BM", "mu(0u)", [Q_TILE, DO_TILE]),
            load_block("load_kv", "BN", "mu(1u)", [K_TILE, V_TILE]),
        ]
    else:  # the key side: its own keys, streamed queries
        loads = [
            load_block("load_kv", "BN", "mu(1u)", [K_TILE, V_TILE]),
            load_block("load_q", "BM", "mu(0u)", [Q_TILE, DO_TILE]),
        ]
    return render(
        name,
        PRELUDE=kernel_text("prelude"),
        COMMON=_common(types),
        SIDES=_side_bindings(types, side_first),
        CHAINS=chains,
        LOADS="\n\n".join(loads),
        DM=dm,
        D4=dm // 4,
        D4P=dm // 4 + 1,
        BLOCK=block,
    )


def attention_forward(
    ops: AttentionOperands, score: Expr, into: Operand | None = None
) -> tuple[GpuArray | Operand, GpuArray]:
    """The output ``softmax(score(q k^T)) v`` of shape ``(*lead, L, Ev)`` and the
    statistics buffer (each row's log-sum-exp, room after it for the backward's D).

    ``into``: a float32 view of that shape (any non-negative strides) the output is
    written through instead of a new array, e.g. heads merged back in place."""
    _check(ops)
    operands, slots = _inputs(ops)
    device = operands[0].array.device
    out_shape = (*ops.lead, ops.length, ops.value_head)
    out, slots[_O] = _destination(into, out_shape, device)
    stats = GpuArray.empty((2, ops.batch, max(ops.length, 1)), np.float32, device)
    blocks = -(-ops.length // 16) * ops.batch
    if blocks == 0:
        return out, stats
    types = tuple(op.array.wgsl for op in operands[3:])
    chains = _chain("score", score, types)
    key = ("attention_forward", _head_tile(ops), chains, types)
    pipe = device.pipeline(
        key,
        lambda: _sources("attention_forward", ops, chains, 1 + _FORWARD_BUFFERS),
        ("uniform",) + ("read",) * 3 + ("write",) * 2 + ("read",) * len(types),
    )
    params = device.params(_meta(ops, slots))
    buffers = (
        params,
        *(op.array.buffer for op in operands[:3]),
        Operand.of(out).array.buffer,
        stats.buffer,
        *(op.array.buffer for op in operands[3:]),
    )
    device.dispatch(pipe, buffers, fold_groups(blocks, device.max_groups))
    return out, stats


def attention_backward(
    ops: AttentionOperands,
    score: Expr,
    grad: Expr,
    out: GpuArray | Operand,
    stats: GpuArray,
    d_out: GpuArray | Operand,
    into: Sequence[Operand | None] = (None, None, None),
) -> tuple[GpuArray | Operand, GpuArray | Operand, GpuArray | Operand]:
    """dQ ``(*lead, L, E)``, dK^T ``(*lead, E, S)`` and dV ``(*lead, S, Ev)`` for the
    output gradient ``d_out``, from `attention_forward`'s output and statistics.

    ``into``: for each gradient, None (a new array) or a float32 view of its shape
    that it is written through (e.g. straight into its region of qkv's gradient)."""
    _check(ops)
    operands, slots = _inputs(ops)
    device = operands[0].array.device
    lead, length, source = ops.lead, ops.length, ops.source
    dq, slots[_DQ] = _destination(into[0], (*lead, length, ops.head), device)
    dkt, slots[_DKT] = _destination(into[1], (*lead, ops.head, source), device)
    dv, slots[_DV] = _destination(into[2], (*lead, source, ops.value_head), device)
    d_op, slots[_DO] = _operand(d_out, (*lead, length, ops.value_head))
    o_op, slots[_O] = _operand(out, (*lead, length, ops.value_head))
    dq_b, dkt_b, dv_b = (Operand.of(x).array.buffer for x in (dq, dkt, dv))
    types = tuple(op.array.wgsl for op in operands[3:])
    chains = _chain("score", score, types) + "\n" + _chain("grad", grad, types)
    params = device.params(_meta(ops, slots))
    inputs = [op.array.buffer for op in operands[:3]]
    sides = [op.array.buffer for op in operands[3:]]
    reads = ("read",) * len(types)
    first = 1 + _BACKWARD_BUFFERS
    if length and source:
        pipe_q = device.pipeline(
            ("attention_backward_q", _head_tile(ops), chains, types),
            lambda: _sources("attention_backward_q", ops, chains, first),
            ("uniform",) + ("read",) * 5 + ("write",) * 2 + reads,
        )
        buffers = (params, *inputs, o_op.array.buffer, d_op.array.buffer, stats.buffer, dq_b)
        blocks = -(-length // 16) * ops.batch
        device.dispatch(pipe_q, (*buffers, *sides), fold_groups(blocks, device.max_groups))
        pipe_kv = device.pipeline(
            ("attention_backward_kv", _head_tile(ops), chains, types),
            lambda: _sources("attention_backward_kv", ops, chains, first),
            ("uniform",) + ("read",) * 5 + ("write",) * 2 + reads,
        )
        buffers = (params, *inputs, d_op.array.buffer, stats.buffer, dkt_b, dv_b)
        blocks = -(-source // 16) * ops.batch
        device.dispatch(pipe_kv, (*buffers, *sides), fold_groups(blocks, device.max_groups))
    return dq, dkt, dv
