"""Generated elementwise kernels with broadcasting through strides (fusable)."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.ops.matmul import contiguous_strides
from asgrad.gpu.source import kernel_text, render, wgsl_type

__all__ = ["MAX_INPUTS", "MAX_RANK", "Operand", "elementwise"]

MAX_INPUTS = 7  # 8 storage buffers per stage (WebGPU default): 7 inputs + the output
MAX_RANK = 8


@dataclass(frozen=True)
class Operand:
    """An input of an elementwise kernel: an array seen through a strided view.

    ``shape`` must broadcast to the output shape; ``strides`` and ``offset`` are in
    elements of the array's buffer. Build with :meth:`of` (contiguous) or a view method.
    """

    array: GpuArray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def of(cls, array: GpuArray | Operand) -> Operand:
        """The whole array, contiguous."""
        if isinstance(array, Operand):
            return array
        return cls(array, array.shape, contiguous_strides(array.shape))

    def permute(self, axes: Sequence[int]) -> Operand:
        """Axes reordered (``numpy.transpose``) without a copy."""
        return Operand(
            self.array,
            tuple(self.shape[a] for a in axes),
            tuple(self.strides[a] for a in axes),
            self.offset,
        )

    def reshape(self, shape: tuple[int, ...]) -> Operand:
        """A new shape of a contiguous operand."""
        if self.strides != contiguous_strides(self.shape):
            raise GpuUnsupportedError("reshape of a non-contiguous view; copy it first")
        return Operand(self.array, shape, contiguous_strides(shape), self.offset)

    def broadcast_strides(self, out_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Strides over ``out_shape`` (0 on broadcast dimensions)."""
        lead = len(out_shape) - len(self.shape)
        if lead < 0:
            raise GpuUnsupportedError(
                f"operand {self.shape} has more dims than {out_shape}"
            )
        result = [0] * lead
        for size, stride, target in zip(
            self.shape, self.strides, out_shape[lead:], strict=True
        ):
            if size == target:
                result.append(stride if size != 1 else 0)
            elif size == 1:
                result.append(0)
            else:
                raise GpuUnsupportedError(
                    f"operand of shape {self.shape} does not broadcast to {out_shape}"
                )
        return tuple(result)


def _collapse(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dims that every operand walks contiguously; drop size-1 dims."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if out_shape and all(
            st[d] * shape[d] == os[-1]
            for st, os in zip(strides, out_strides, strict=True)
        ):
            out_shape[-1] *= shape[d]
            for st, os in zip(strides, out_strides, strict=True):
                os[-1] = st[d]
            continue
        out_shape.append(shape[d])
        for st, os in zip(strides, out_strides, strict=True):
            os.append(st[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def elementwise(
    expr: str,
    inputs: Sequence[GpuArray | Operand],
    out_dtype: Any = np.float32,
    out_shape: tuple[int, ...] | None = None,
    out: GpuArray | None = None,
) -> GpuArray:
    """Record ``out = expr(x0, x1, ...)`` elementwise with numpy broadcasting.

    ``expr`` is a WGSL expression over ``x0..x{n-1}`` (each of its input's storage
    type) that yields the output's storage type; functions of ``prelude.wgsl`` may be
    used. Returns ``out`` (allocated when not given).
    """
    ops = [Operand.of(x) for x in inputs]
    if len(ops) > MAX_INPUTS:
        raise GpuUnsupportedError(
            f"an elementwise kernel takes at most {MAX_INPUTS} inputs"
        )
    if out_shape is None:
        out_shape = tuple(np.broadcast_shapes(*(o.shape for o in ops))) if ops else ()
    device = out.device if out is not None else (ops[0].array.device if ops else None)
    if out is None:
        out = GpuArray.empty(out_shape, out_dtype, device)
    n = math.prod(out_shape)
    if n == 0:
        return out
    strides = [o.broadcast_strides(out_shape) for o in ops]
    shape, strides = _collapse(out_shape, strides)
    if len(shape) > MAX_RANK:
        raise GpuUnsupportedError(f"elementwise kernels support rank <= {MAX_RANK}")
    contiguous = contiguous_strides(shape)
    modes = tuple(
        "scalar"
        if all(s == 0 for s in st)
        else "contig"
        if st == contiguous
        else "strided"
        for st in strides
    )
    rank = len(shape) if "strided" in modes else 0
    in_types = tuple(o.array.wgsl for o in ops)
    out_type = wgsl_type(out.dtype)

    meta = [0] * 80
    meta[0], meta[1] = n, len(shape)
    meta[4 : 4 + len(shape)] = shape
    for k, (op, st) in enumerate(zip(ops, strides, strict=True)):
        meta[12 + 8 * k : 12 + 8 * k + len(st)] = st
        meta[72 + k] = op.offset

    def source() -> str:
        bindings = [
            f"@group(0) @binding({k + 1}) var<storage, read> in{k}: array<{t}>;"
            for k, t in enumerate(in_types)
        ]
        bindings.append(
            f"@group(0) @binding({len(ops) + 1}) "
            f"var<storage, read_write> out: array<{out_type}>;"
        )
        index: list[str] = []
        strided = [k for k, m in enumerate(modes) if m == "strided"]
        if strided:
            index.append("    var rem = i;")
            index += [f"    var o{k} = mu({72 + k}u);" for k in strided]
            for d in range(rank - 1, -1, -1):
                if d == 0:
                    index.append("    let c0 = rem;")
                else:
                    index.append(f"    let c{d} = rem % mu({4 + d}u);")
                    index.append(f"    rem = rem / mu({4 + d}u);")
                index += [f"    o{k} += c{d} * mu({12 + 8 * k + d}u);" for k in strided]
        loads = []
        for k, mode in enumerate(modes):
            where = {"contig": f"i + mu({72 + k}u)", "scalar": f"mu({72 + k}u)"}.get(
                mode, f"o{k}"
            )
            loads.append(f"    let x{k} = in{k}[{where}];")
        return render(
            "elementwise",
            PRELUDE=kernel_text("prelude"),
            BINDINGS="\n".join(bindings),
            INDEX="\n".join(index),
            LOADS="\n".join(loads),
            EXPR=expr,
        )

    binds = ("uniform",) + ("read",) * len(ops) + ("write",)
    pipe = out.device.pipeline(
        ("elementwise", expr, modes, rank, in_types, out_type), source, binds
    )
    params = out.device.params(struct.pack(f"<{len(meta)}I", *meta))
    buffers = (params, *(o.array.buffer for o in ops), out.buffer)
    out.device.dispatch(pipe, buffers, fold_groups(-(-n // 256), out.device.max_groups))
    return out
