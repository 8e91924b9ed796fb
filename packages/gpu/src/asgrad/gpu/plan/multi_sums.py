"""Column sums launched with an update batch: every bias gradient's partial sums in
one dispatch (per binding limit), finished by the multi-tensor update that reads them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.gpu.plan.fusion import materialize
from asgrad.gpu.plan.update_chains import UpdateBatch
from asgrad.gpu.plan.values import Value

_THREADS = 256


def blocks_kernel(decls: Sequence[str], blocks: Sequence[str]) -> str:
    """A kernel of ``_THREADS`` threads a workgroup whose workgroup ``w`` (over a folded
    grid) runs the one of ``blocks`` that owns it (each block returns when done)."""
    return "\n".join(
        [
            *decls,
            "",
            f"@compute @workgroup_size({_THREADS}, 1, 1)",
            "fn main(",
            "    @builtin(workgroup_id) wid: vec3<u32>,",
            "    @builtin(num_workgroups) nwg: vec3<u32>,",
            "    @builtin(local_invocation_index) li: u32,",
            ") {",
            "    let w = wid.x + wid.y * nwg.x;",
            *blocks,
            "}",
        ]
    )


__all__ = ["Partial", "launch_column_sums"]


def _contiguous(op: Operand) -> bool:
    expected = 1
    for size, stride in zip(reversed(op.shape), reversed(op.strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


# -- column sums ------------------------------------------------------------------------
_CHUNK = 32  # rows a thread sums at least


_MAX_CHUNKS = 64  # partial sums each element of the update adds up


@dataclass(eq=False)
class Partial:
    """A column sum as partial sums: ``arena[offset + c * size + i]`` for each chunk c."""

    arena: GpuArray
    offset: int
    chunks: int
    size: int
    shape: tuple[int, ...]  # of one sum: its input's trailing axes


def launch_column_sums(
    batch: UpdateBatch, values: Mapping[int, Value], device: Device, limit: int
) -> dict[int, Partial]:
    """Record the partial sums of every column sum of ``batch`` (one dispatch per
    binding limit); each element of the update adds its chunks up."""
    if not batch.sums:
        return {}
    jobs: list[tuple[int, GpuArray | Operand, int, int, int]] = []  # id, src, rows, n, chunks
    total = 0
    nodes = {n.id: n for c in batch.chains for m in c for n in m.inputs}
    for nid, rows in batch.sums.items():
        src = values[nodes[nid].inputs[0].id]
        if not (isinstance(src, GpuArray) or (isinstance(src, Operand) and _contiguous(src))):
            src = materialize(src)
        n = math.prod(src.shape) // rows
        chunks = min(-(-rows // _CHUNK), _MAX_CHUNKS)
        chunks = -(-rows // -(-rows // chunks))
        jobs.append((nid, src, rows, n, chunks))
        total += chunks * n
    arena = GpuArray.empty((total,), np.float32, device)
    partials: dict[int, Partial] = {}
    offset = 0
    group: list[tuple[GpuArray | Operand, int, int, int, int]] = []
    bound: set[int] = {id(arena.buffer)}
    for nid, src, rows, n, chunks in jobs:
        buffer = Operand.of(src).array.buffer
        if group and len(bound | {id(buffer)}) > limit:
            _dispatch_sums(group, arena, device)
            group, bound = [], {id(arena.buffer)}
        group.append((src, rows, n, chunks, offset))
        bound.add(id(buffer))
        lead = 0
        while lead < len(src.shape) and math.prod(src.shape[lead:]) != n:
            lead += 1
        partials[nid] = Partial(arena, offset, chunks, n, tuple(src.shape[lead:]))
        offset += chunks * n
    _dispatch_sums(group, arena, device)
    return partials


def _dispatch_sums(
    jobs: Sequence[tuple[GpuArray | Operand, int, int, int, int]], arena: GpuArray, device: Device
) -> None:
    """One kernel: each job's partial sums over its chunks of rows, into ``arena``."""
    slots: dict[int, int] = {id(arena.buffer): 0}
    buffers = [arena.buffer]
    for src, *_ in jobs:
        array = Operand.of(src).array
        if id(array.buffer) not in slots:
            slots[id(array.buffer)] = len(buffers)
            buffers.append(array.buffer)
    decls = ["@group(0) @binding(0) var<storage, read_write> b0: array<f32>;"]
    decls += [
        f"@group(0) @binding({k}) var<storage, read> b{k}: array<f32>;"
        for k in range(1, len(buffers))
    ]
    blocks: list[str] = []
    start = 0
    for src, rows, n, chunks, offset in jobs:
        op = Operand.of(src)
        slot = slots[id(op.array.buffer)]
        length = -(-rows // chunks)
        groups = -(-(chunks * n) // _THREADS)
        blocks.append(
            "\n".join(
                [
                    f"    if (w < {start + groups}u) {{",
                    f"        let t = (w - {start}u) * {_THREADS}u + li;",
                    f"        if (t < {chunks * n}u) {{",
                    f"            let i = t % {n}u;",
                    f"            let r0 = (t / {n}u) * {length}u;",
                    f"            let r1 = min({rows}u, r0 + {length}u);",
                    "            var acc = 0.0;",
                    "            for (var r = r0; r < r1; r++) {",
                    f"                acc += b{slot}[{op.offset}u + r * {n}u + i];",
                    "            }",
                    f"            b0[{offset}u + t] = acc;",
                    "        }",
                    "        return;",
                    "    }",
                ]
            )
        )
        start += groups
    source = blocks_kernel(decls, blocks)
    key = ("multi_column_sum", f"{len(jobs)} sums", (source,))
    pipe = device.pipeline(key, lambda: source, ("write",) + ("read",) * (len(buffers) - 1))
    device.dispatch(pipe, buffers, fold_groups(start, device.max_groups))


def _finish_sum(part: Partial) -> GpuArray:
    """A column sum from its partial sums, as its own kernel (the unfused path)."""
    view = Operand(part.arena, (part.chunks, part.size), (part.size, 1), part.offset)
    return reduce_axis("sum", materialize(view), 0).view(part.shape)
