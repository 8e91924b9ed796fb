"""The index family on the GPU: slice, scatter_slice, gather, scatter_add, one_hot.

Slices are copies through strided views with the elementwise kernel; gather, its
gradient scatter-add and one-hot have kernels of their own (``kernels/index_gather.wgsl``,
``kernels/index_scatter_add.wgsl``, ``kernels/index_one_hot.wgsl``), one thread per output
element; scatter-add into rows of 16 or more elements (an embedding's gradient) takes
``kernels/index_scatter_add_rows.wgsl``, a workgroup per output row (`scatter_add_form`).

An index outside ``[0, n)`` (a negative one too: indices do not wrap) reads nothing:
gather gives 0 for it, scatter-add adds nothing, one-hot an all-zero row; the kernel
records it in a check slot (`asgrad.gpu.device.checks`) and the next readback raises
[`OutOfRangeError`][asgrad.tensor.OutOfRangeError] naming the op and the valid range.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand, slice_view
from asgrad.gpu.device.checks import checks_source
from asgrad.gpu.device.source import kernel_text, numpy_dtype, render, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, zero
from asgrad.gpu.lowering.elementwise import elementwise, strided_copy
from asgrad.tensor import TensorType

__all__ = [
    "LOWERINGS",
    "WGSL_FILES",
    "gather",
    "one_hot",
    "scatter_add",
    "scatter_add_form",
    "scatter_along",
    "take_along_axis",
]

WGSL_FILES: tuple[str, ...] = (
    "index_gather.wgsl",
    "index_scatter_add.wgsl",
    "index_scatter_add_rows.wgsl",
    "index_one_hot.wgsl",
    "elementwise.wgsl",
    "index_along_take.wgsl",
    "index_along_scatter.wgsl",
    "prelude.wgsl",
)


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def gather(x: GpuArray, indices: GpuArray, axis: int) -> GpuArray:
    """``numpy.take(x, indices, axis)`` (indices of an integer dtype)."""
    axis %= max(x.ndim, 1)
    _, length, inner = _split(x.shape, axis)
    shape = x.shape[:axis] + indices.shape + x.shape[axis + 1 :]
    out = GpuArray.empty(shape, x.dtype, x.device)
    if out.size == 0:
        return out
    device = x.device
    t = x.wgsl
    pipe = device.pipeline(
        ("index_gather", t),
        lambda: render("index_gather", T=t, ZERO=zero(t), CHECKS=checks_source(4)),
        ("uniform", "read", "read", "write", "checks"),
    )
    slot = _slot(device, "gather", f"axis {axis} of the {x.shape} input", length, "read 0")
    meta = struct.pack("<8I", out.size, length, indices.size, inner, slot, 0, 0, 0)
    buffers = (device.params(meta), x.buffer, indices.buffer, out.buffer, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-out.size // 256), device.max_groups))
    return out


def _slot(device: Device, op: str, what: str, n: int, effect: str) -> int:
    """The check slot of an index op whose indices must lie in [0, n)."""
    detail = f"indices into {what} must satisfy 0 <= index < {n} (the kernel {effect} for them)"
    return device.checks.slot("index", op, detail)


_ROWS_MIN_INNER = 16
"""The narrowest row for which scatter-add takes the one-workgroup-per-row kernel."""


def scatter_add_form(outer: int, length: int, n_idx: int, inner: int) -> str:
    """Which kernel scatter-adds ``n_idx`` rows of width ``inner`` into ``length`` rows.

    ``"rows"`` (``kernels/index_scatter_add_rows.wgsl``): a workgroup per output row and
    block of 64 columns reads the indices once and sums the matching rows of the
    gradient; the indices are read ``outer * length * ceil(inner / 64)`` times.
    ``"elements"`` (``kernels/index_scatter_add.wgsl``): a thread per output element
    reads every index, ``outer * length * inner`` times; it is kept for rows narrower
    than 16, where most of a row workgroup's 64 threads would idle. Both add in index
    order, so they give the same bits.
    """
    del outer, length, n_idx  # every size: the row kernel reads fewer indices
    return "rows" if inner >= _ROWS_MIN_INNER else "elements"


def scatter_add(g: GpuArray, indices: GpuArray, shape: tuple[int, ...], axis: int) -> GpuArray:
    """Zeros of ``shape`` with ``g`` added at ``indices`` along ``axis`` (gather's VJP)."""
    if g.dtype != np.float32:
        raise GpuUnsupportedError(f"scatter_add on the GPU takes float32, got {g.dtype}")
    axis %= max(len(shape), 1)
    outer, length, inner = _split(shape, axis)
    out = GpuArray.empty(shape, np.float32, g.device)
    if out.size == 0:
        return out
    device = g.device
    form = scatter_add_form(outer, length, indices.size, inner)
    kernel = "index_scatter_add" if form == "elements" else "index_scatter_add_rows"
    pipe = device.pipeline(
        (kernel,),
        lambda: render(kernel, CHECKS=checks_source(4)),
        ("uniform", "read", "read", "write", "checks"),
    )
    slot = _slot(
        device, "scatter_add", f"axis {axis} of the {shape} result", length, "added nothing"
    )
    if form == "elements":
        meta = struct.pack("<8I", out.size, length, indices.size, inner, slot, 0, 0, 0)
        groups = -(-out.size // 256)
    else:
        col_blocks = -(-inner // 64)
        groups = outer * length * col_blocks
        meta = struct.pack("<8I", groups, length, indices.size, inner, slot, col_blocks, 0, 0)
    buffers = (device.params(meta), g.buffer, indices.buffer, out.buffer, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(groups, device.max_groups))
    return out


def one_hot(indices: GpuArray, depth: int, dtype: Any = np.float32) -> GpuArray:
    """``indices[..., None] == arange(depth)`` as ``dtype``."""
    out = GpuArray.empty((*indices.shape, depth), dtype, indices.device)
    if out.size == 0:
        return out
    t = out.wgsl
    zero_t, one = {
        "f16": ("0.0h", "1.0h"),
        "f32": ("0.0", "1.0"),
        "i32": ("0i", "1i"),
        "u32": ("0u", "1u"),
    }[t]
    device = indices.device
    pipe = device.pipeline(
        ("index_one_hot", t),
        lambda: render("index_one_hot", T=t, ZERO=zero_t, ONE=one, CHECKS=checks_source(3)),
        ("uniform", "read", "write", "checks"),
    )
    slot = _slot(device, "one_hot", f"one_hot of depth {depth}", depth, "wrote zero rows")
    params = device.params(struct.pack("<4I", out.size, depth, slot, 0))
    buffers = (params, indices.buffer, out.buffer, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-out.size // 256), device.max_groups))
    return out


def _slice(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return strided_copy(slice_view(Operand.of(ins[0]), attrs["index"]), out)


def _zeros(out: TensorType) -> GpuArray:
    dtype = numpy_dtype(out.dtype)
    return elementwise(zero(wgsl_type(dtype)), [], dtype, out.shape)


def _scatter_slice(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    result = _zeros(out)
    view = slice_view(Operand.of(result), attrs["index"])
    elementwise("x0", [ins[0]], out=view)
    return result


def _gather(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return gather(ins[0], ins[1], int(attrs["axis"]))


def _scatter_add(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, indices, _ = ins
    return scatter_add(g, indices, out.shape, int(attrs["axis"]))


def _one_hot(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return one_hot(ins[0], int(attrs["depth"]), numpy_dtype(out.dtype))


# -- along one axis (PyTorch's gather/scatter) -------------------------------------------
_COMBINE = {
    "sum": "acc + v",
    "mean": "acc + v",
    "prod": "acc * v",
    "amax": "asg_max(acc, v)",  # NaN-propagating, as numpy's maximum
    "amin": "asg_min(acc, v)",
}


def take_along_axis(x: GpuArray, indices: GpuArray, axis: int) -> GpuArray:
    """``numpy.take_along_axis(x, indices, axis)`` (``indices`` of ``x``'s rank)."""
    axis %= max(x.ndim, 1)
    _, length, inner = _split(x.shape, axis)
    out = GpuArray.empty(indices.shape, x.dtype, x.device)
    if out.size == 0:
        return out
    device, t = x.device, x.wgsl
    pipe = device.pipeline(
        ("index_along_take", t),
        lambda: render("index_along_take", T=t, ZERO=zero(t), CHECKS=checks_source(4)),
        ("uniform", "read", "read", "write", "checks"),
    )
    slot = _slot(device, "take_along_axis", f"axis {axis} of the {x.shape} input", length, "read 0")
    meta = struct.pack("<8I", out.size, length, indices.shape[axis], inner, slot, 0, 0, 0)
    buffers = (device.params(meta), x.buffer, indices.buffer, out.buffer, device.checks.buffer)
    device.dispatch(pipe, buffers, fold_groups(-(-out.size // 256), device.max_groups))
    return out


def scatter_along(
    base: GpuArray | None,
    indices: GpuArray,
    src: GpuArray,
    shape: tuple[int, ...],
    axis: int,
    reduce: str = "sum",
    include_self: bool = True,
) -> GpuArray:
    """``base`` (zeros when None) with ``src`` combined in at ``indices`` along ``axis``."""
    if src.dtype != np.float32:
        raise GpuUnsupportedError(f"scatter ops on the GPU take float32, got {src.dtype}")
    axis %= max(len(shape), 1)
    _, length, inner = _split(shape, axis)
    out = GpuArray.empty(shape, np.float32, src.device)
    if out.size == 0:
        return out
    device = src.device
    pipe = device.pipeline(
        ("index_along_scatter", reduce),
        lambda: render(
            "index_along_scatter",
            COMBINE=_COMBINE[reduce],
            CHECKS=checks_source(5),
            PRELUDE=kernel_text("prelude"),
        ),
        ("uniform", "read", "read", "read", "write", "checks"),
    )
    op = "scatter_add" if base is None else "scatter_reduce"
    slot = _slot(device, op, f"axis {axis} of the {shape} result", length, "combined nothing")
    flags = (int(base is not None), int(include_self), int(reduce == "mean"))
    meta = struct.pack("<8I", out.size, length, indices.shape[axis], inner, slot, *flags)
    first = src if base is None else base
    buffers = (
        device.params(meta),
        first.buffer,
        indices.buffer,
        src.buffer,
        out.buffer,
        device.checks.buffer,
    )
    device.dispatch(pipe, buffers, fold_groups(-(-out.size // 256), device.max_groups))
    return out


def _take_along_axis(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return take_along_axis(ins[0], ins[1], int(attrs["axis"]))


def _scatter_add_along(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, indices, _ = ins
    return scatter_along(None, indices, g, out.shape, int(attrs["axis"]))


def _scatter_reduce(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    x, indices, src = ins
    return scatter_along(
        x,
        indices,
        src,
        out.shape,
        int(attrs["axis"]),
        str(attrs["reduce"]),
        bool(attrs["include_self"]),
    )


LOWERINGS: dict[str, Lowering] = {
    "slice": _slice,
    "scatter_slice": _scatter_slice,
    "gather": _gather,
    "scatter_add": _scatter_add,
    "one_hot": _one_hot,
    "take_along_axis": _take_along_axis,
    "scatter_add_along": _scatter_add_along,
    "scatter_reduce": _scatter_reduce,
}
