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
from asgrad.gpu.source import kernel_text, render

__all__ = ["MAX_INPUTS", "MAX_RANK", "Operand", "elementwise"]

MAX_INPUTS = 7  # 8 storage buffers per stage (WebGPU default): 7 inputs + the output
MAX_RANK = 8
OUT_SLOT = 7  # params slot of the output's strides and offset


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
            raise GpuUnsupportedError(f"operand {self.shape} has more dims than {out_shape}")
        result = [0] * lead
        for size, stride, target in zip(self.shape, self.strides, out_shape[lead:], strict=True):
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
            st[d] * shape[d] == os[-1] for st, os in zip(strides, out_strides, strict=True)
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
    out: GpuArray | Operand | None = None,
) -> GpuArray:
    """Record ``out = expr(x0, x1, ...)`` elementwise with numpy broadcasting.

    ``expr`` is a WGSL expression over ``x0..x{n-1}`` (each of its input's storage
    type) that yields the output's storage type; functions of ``prelude.wgsl`` may be
    used. ``out`` may be an :class:`Operand`: a strided view of a larger buffer (a
    slice, say), whose shape is the output shape. Returns the array written.
    """
    ops = [Operand.of(x) for x in inputs]
    if len(ops) > MAX_INPUTS:
        raise GpuUnsupportedError(f"an elementwise kernel takes at most {MAX_INPUTS} inputs")
    out_view = out if isinstance(out, Operand) else None
    if out_view is not None:
        out_shape = out_view.shape
    if out_shape is None:
        out_shape = tuple(np.broadcast_shapes(*(o.shape for o in ops))) if ops else ()
    if out is None:
        out = GpuArray.empty(out_shape, out_dtype, ops[0].array.device if ops else None)
    target = out_view.array if out_view is not None else out
    assert isinstance(target, GpuArray)
    n = math.prod(out_shape)
    if n == 0:
        return target
    strides = [o.broadcast_strides(out_shape) for o in ops]
    if out_view is not None:
        strides.append(out_view.strides)
    shape, strides = _collapse(out_shape, strides)
    if len(shape) > MAX_RANK:
        raise GpuUnsupportedError(f"elementwise kernels support rank <= {MAX_RANK}")
    contiguous = contiguous_strides(shape)
    modes = tuple(
        "scalar" if all(s == 0 for s in st) else "contig" if st == contiguous else "strided"
        for st in strides
    )
    out_mode = "contig"
    offsets = [o.offset for o in ops]
    if out_view is not None:
        out_mode = "contig" if modes[-1] == "contig" else "strided"
        modes = modes[:-1]
        offsets += [0] * (OUT_SLOT - len(ops)) + [out_view.offset]
        strides = strides[:-1] + [()] * (OUT_SLOT - len(ops)) + [strides[-1]]
    rank = len(shape) if "strided" in (*modes, out_mode) else 0
    in_types = tuple(o.array.wgsl for o in ops)
    out_type = target.wgsl

    meta = [0] * 96
    meta[0], meta[1] = n, len(shape)
    meta[4 : 4 + len(shape)] = shape
    for k, st in enumerate(strides):
        meta[12 + 8 * k : 12 + 8 * k + len(st)] = [s & 0xFFFFFFFF for s in st]
    for k, off in enumerate(offsets):
        meta[76 + k] = off

    # an input that is the output's own buffer (an in-place update) is read through
    # the output binding: one buffer may not be bound as both read and read_write
    own = tuple(o.array.buffer is target.buffer for o in ops)
    for k, is_own in enumerate(own):
        same_walk = n == 1 or (modes[k] == "contig" and out_mode == "contig")
        if is_own and (
            not same_walk or offsets[k] != (out_view.offset if out_view is not None else 0)
        ):
            raise GpuUnsupportedError("an in-place input must be read exactly where it is written")
    bound = [k for k in range(len(ops)) if not own[k]]

    def source() -> str:
        bindings = [
            f"@group(0) @binding({j + 1}) var<storage, read> in{k}: array<{in_types[k]}>;"
            for j, k in enumerate(bound)
        ]
        bindings.append(
            f"@group(0) @binding({len(bound) + 1}) var<storage, read_write> out: array<{out_type}>;"
        )
        strided = [k for k, m in enumerate(modes) if m == "strided"]
        if out_mode == "strided":
            strided.append(OUT_SLOT)
        index: list[str] = []
        if strided:
            index.append("    var rem = i;")
            index += [f"    var o{k} = mu({76 + k}u);" for k in strided]
            for d in range(rank - 1, -1, -1):
                if d == 0:
                    index.append("    let c0 = rem;")
                else:
                    index.append(f"    let c{d} = rem % mu({4 + d}u);")
                    index.append(f"    rem = rem / mu({4 + d}u);")
                index += [f"    o{k} += c{d} * mu({12 + 8 * k + d}u);" for k in strided]
        loads = []
        for k, mode in enumerate(modes):
            where = {"contig": f"i + mu({76 + k}u)", "scalar": f"mu({76 + k}u)"}.get(mode, f"o{k}")
            source_array = "out" if own[k] else f"in{k}"
            loads.append(f"    let x{k} = {source_array}[{where}];")
        out_index = f"o{OUT_SLOT}" if out_mode == "strided" else f"i + mu({76 + OUT_SLOT}u)"
        return render(
            "elementwise",
            PRELUDE=kernel_text("prelude"),
            BINDINGS="\n".join(bindings),
            INDEX="\n".join(index),
            LOADS="\n".join(loads),
            EXPR=expr,
            OUT_INDEX=out_index,
        )

    binds = ("uniform",) + ("read",) * len(bound) + ("write",)
    device = target.device
    key = ("elementwise", expr, modes, out_mode, rank, in_types, out_type, own)
    pipe = device.pipeline(key, source, binds)
    params = device.params(struct.pack(f"<{len(meta)}I", *meta))
    buffers = (params, *(ops[k].array.buffer for k in bound), target.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-n // 256), device.max_groups))
    return target
