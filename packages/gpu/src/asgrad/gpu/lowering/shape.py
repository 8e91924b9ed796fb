"""The shape family on the GPU: views, transposes, broadcasts, ``sum_to_like``, concat.

A view (reshape, squeeze...) returns an alias of its input's buffer and launches
nothing; a transpose or broadcast is a copy through a strided view with the
elementwise kernel; ``sum_to_like`` is a reduction; concat copies each input into its
slice of the result.
"""

from __future__ import annotations

from asgrad.gpu.device.array import GpuArray, Operand, slice_view
from asgrad.gpu.device.source import numpy_dtype
from asgrad.gpu.lowering.common import Attrs, Lowering, alias
from asgrad.gpu.lowering.elementwise import elementwise, strided_copy
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.tensor import TensorType

__all__ = ["LOWERINGS", "WGSL_FILES"]

WGSL_FILES: tuple[str, ...] = (
    "elementwise.wgsl",
    "reduction_rows.wgsl",
    "reduction_cols.wgsl",
    "reduction_cols_block.wgsl",
)


def _view(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return alias(ins[0], out.shape)


def _transpose(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return strided_copy(Operand.of(ins[0]).permute(tuple(attrs["axes"])), out)


def _broadcast(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return strided_copy(Operand.of(ins[0]), out)


def _sum_to_like(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g = ins[0]
    lead = g.ndim - len(out.shape)
    axes = list(range(lead)) + [
        lead + i for i, size in enumerate(out.shape) if size == 1 and g.shape[lead + i] != 1
    ]
    if not axes:
        return alias(g, out.shape)
    summed = reduce_axis("sum", g, axes, keepdims=False, out_dtype=numpy_dtype(out.dtype))
    return alias(summed, out.shape)


def _concat(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    axis = int(attrs["axis"]) % len(out.shape)
    result = GpuArray.empty(out.shape, numpy_dtype(out.dtype), ins[0].device)
    start = 0
    for x in ins:
        index = [slice(None)] * axis + [slice(start, start + x.shape[axis])]
        elementwise("x0", [x], out=slice_view(Operand.of(result), index))
        start += x.shape[axis]
    return result


LOWERINGS: dict[str, Lowering] = {
    "reshape": _view,
    "reshape_like": _view,
    "expand_dims": _view,
    "squeeze": _view,
    "transpose": _transpose,
    "broadcast_to": _broadcast,
    "broadcast_like": _broadcast,
    "sum_to_like": _sum_to_like,
    "concat": _concat,
}
