"""Column sums launched with an update batch: every bias gradient's partial sums in
one dispatch (per binding limit), finished by the multi-tensor update that reads them
(and by the gradients' checks, `asgrad.gpu.plan.multi_finite`, which read them first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.plan.fusion import materialize
from asgrad.gpu.plan.values import Deferred, Partial, Summed, Value
from asgrad.tensor import TensorType

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


__all__ = ["ColumnSums", "Partial"]


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


class ColumnSums:
    """The column sums of an update batch (bias gradients), each registered at its
    node's step as a `Summed` value, launched together (one dispatch per binding
    limit) when the first reader needs its partial sums: the gradients' checks, or the
    update batch. A sum registered after a launch waits for the next."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.limit = int(device.limits.get("max-storage-buffers-per-shader-stage", 8))
        self.pending: list[tuple[Summed, Value, int]] = []  # the value, its input, rows

    def add(self, src: Value, rows: int, out: TensorType) -> Summed:
        """The sum of ``src`` over its leading ``rows``, typed ``out``; launched later."""
        value = Summed(out, launch=self.launch)
        self.pending.append((value, src, rows))
        return value

    def launch(self) -> None:
        """Launch the partial sums of every sum registered since the last launch."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        jobs: list[tuple[Summed, GpuArray | Operand, int, int, int]] = []
        total = 0
        for value, src, rows in pending:
            src = _unwidened(src)
            if not (isinstance(src, GpuArray) or (isinstance(src, Operand) and _contiguous(src))):
                src = materialize(src)
            n = math.prod(src.shape) // rows
            chunks = min(-(-rows // _CHUNK), _MAX_CHUNKS)
            chunks = -(-rows // -(-rows // chunks))
            jobs.append((value, src, rows, n, chunks))
            total += chunks * n
        arena = GpuArray.empty((total,), np.float32, self.device)
        offset = 0
        group: list[tuple[GpuArray | Operand, int, int, int, int]] = []
        bound: set[int] = {id(arena.buffer)}
        for value, src, rows, n, chunks in jobs:
            buffer = Operand.of(src).array.buffer
            if group and len(bound | {id(buffer)}) > self.limit:
                _dispatch_sums(group, arena, self.device)
                group, bound = [], {id(arena.buffer)}
            group.append((src, rows, n, chunks, offset))
            bound.add(id(buffer))
            lead = 0
            while lead < len(src.shape) and math.prod(src.shape[lead:]) != n:
                lead += 1
            value.partial = Partial(arena, offset, chunks, n, tuple(src.shape[lead:]))
            offset += chunks * n
        _dispatch_sums(group, arena, self.device)


def _unwidened(src: Value) -> Value:
    """``src``, or the float16 array it widens when it is a deferred cast of one to
    float32 alone (a float16 product's gradient): the sums kernel reads float16
    widened, exactly as the cast would, so the widened copy is never launched."""
    if not isinstance(src, Deferred) or src.array is not None or src.wgsl != "f32":
        return src
    e = src.expr
    if e.op != "cast" or e.value != "float32" or e.args[0].op != "arg" or len(src.inputs) != 1:
        return src
    (inner,) = src.inputs
    if isinstance(inner, (GpuArray, Operand)) and Operand.of(inner).array.wgsl == "f16":
        return inner
    return src


def _dispatch_sums(
    jobs: Sequence[tuple[GpuArray | Operand, int, int, int, int]], arena: GpuArray, device: Device
) -> None:
    """One kernel: each job's partial sums over its chunks of rows, into ``arena``."""
    slots: dict[int, int] = {id(arena.buffer): 0}
    buffers = [arena.buffer]
    types = ["f32"]  # each binding's element type: a float16 gradient is read widened
    for src, *_ in jobs:
        array = Operand.of(src).array
        if id(array.buffer) not in slots:
            slots[id(array.buffer)] = len(buffers)
            buffers.append(array.buffer)
            types.append(array.wgsl)
    decls = ["@group(0) @binding(0) var<storage, read_write> b0: array<f32>;"]
    decls += [
        f"@group(0) @binding({k}) var<storage, read> b{k}: array<{types[k]}>;"
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
                    "            var acc = vec4<f32>(0.0);",
                    "            var r = r0;",
                    "            for (; r + 3u < r1; r += 4u) {",
                    f"                let at = {op.offset}u + r * {n}u + i;",
                    f"                acc += vec4<f32>(f32(b{slot}[at]), f32(b{slot}[at + {n}u]),",
                    f"                    f32(b{slot}[at + {2 * n}u]),",
                    f"                    f32(b{slot}[at + {3 * n}u]));",
                    "            }",
                    "            for (; r < r1; r++) {",
                    f"                acc.x += f32(b{slot}[{op.offset}u + r * {n}u + i]);",
                    "            }",
                    f"            b0[{offset}u + t] = (acc.x + acc.y) + (acc.z + acc.w);",
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


def sum_lines(name: str, value: Summed, buffer: str, index: str, indent: str) -> list[str]:
    """WGSL statements binding ``name`` to element ``index`` of ``value``: the sum of its
    float32 partial sums (in ``buffer``), rounded to float16 where ``value`` is float16
    (``asg_f2h``: an overflow is an infinity, as the float16 sum's)."""
    p = value.partials()
    lines = [
        f"var {name}_acc = 0.0;",
        f"for (var c = 0u; c < {p.chunks}u; c++) {{",
        f"    {name}_acc += {buffer}[{p.offset}u + c * {p.size}u + {index}];",
        "}",
        f"let {name}: f16 = asg_f2h({name}_acc);"
        if value.wgsl == "f16"
        else f"let {name} = {name}_acc;",
    ]
    return [indent + line for line in lines]
