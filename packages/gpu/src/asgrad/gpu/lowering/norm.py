"""The norm family on the GPU: softmax, log-softmax, layer norm, batch norm.

Softmax is one workgroup per row (``kernels/norm_softmax.wgsl``); layer norm and batch norm,
forward and input gradient, one workgroup per normalised row or channel
(``kernels/norm.wgsl``).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, optional
from asgrad.tensor import TensorType

__all__ = [
    "LOWERINGS",
    "WGSL_FILES",
    "batch_norm",
    "batch_norm_backward",
    "layer_norm",
    "layer_norm_backward",
    "normalize",
    "softmax",
]

WGSL_FILES: tuple[str, ...] = ("norm_softmax.wgsl", "norm.wgsl")


def softmax(
    x: GpuArray, axis: int = -1, log: bool = False, out: GpuArray | None = None
) -> GpuArray:
    """Softmax (``log=True``: log-softmax) of float32 ``x`` along ``axis``."""
    if x.dtype != np.float32:
        raise GpuUnsupportedError(f"softmax on the GPU takes float32, got {x.dtype}")
    out = out or GpuArray.empty(x.shape, np.float32, x.device)
    if x.size == 0:
        return out
    ax = axis % x.ndim
    outer = math.prod(x.shape[:ax])
    r = x.shape[ax]
    inner = math.prod(x.shape[ax + 1 :])
    device = x.device
    flag = "true" if log else "false"
    pipe = device.pipeline(
        ("norm_softmax", flag),
        lambda: render("norm_softmax", LOG=flag),
        ("uniform", "read", "write"),
    )
    meta = struct.pack("<4I", outer, r, inner, 0)
    groups = fold_groups(outer * inner, device.max_groups)
    device.dispatch(pipe, (device.params(meta), x.buffer, out.buffer), groups)
    return out


def _or(a: GpuArray | None, default: GpuArray) -> GpuArray:
    return default if a is None else a


def normalize(
    x: GpuArray,
    *,
    rows: int,
    count: int,
    inner: int,
    outer_stride: int,
    row_stride: int,
    eps: float,
    per_row: bool,
    g: GpuArray | None = None,
    weight: GpuArray | None = None,
    bias: GpuArray | None = None,
) -> GpuArray:
    """Normalise ``rows`` groups of ``count`` elements of ``x`` (see the kernel's header).

    With ``g`` it computes the input gradient instead (``bias`` is then unused).
    """
    for a in (x, g, weight, bias):
        if a is not None and a.dtype != np.float32:
            raise GpuUnsupportedError(f"normalisation on the GPU takes float32, got {a.dtype}")
    out = GpuArray.empty(x.shape, np.float32, x.device)
    if x.size == 0:
        return out
    backward = g is not None
    affine = weight is not None and (backward or bias is not None)
    flags = tuple("true" if f else "false" for f in (backward, affine, per_row))
    device = x.device
    pipe = device.pipeline(
        ("norm", *flags),
        lambda: render("norm", BACKWARD=flags[0], AFFINE=flags[1], PER_ROW=flags[2]),
        ("uniform", "read", "read", "read", "read", "write"),
    )
    meta = struct.pack("<8If", rows, count, inner, outer_stride, row_stride, 0, 0, 0, eps)
    buffers = (
        device.params(meta),
        x.buffer,
        _or(g, x).buffer,
        _or(weight, x).buffer,
        _or(bias, x).buffer,
        out.buffer,
    )
    device.dispatch(pipe, buffers, fold_groups(rows, device.max_groups))
    return out


def layer_norm(
    x: GpuArray,
    axes: int,
    eps: float,
    weight: GpuArray | None = None,
    bias: GpuArray | None = None,
    g: GpuArray | None = None,
) -> GpuArray:
    """Layer norm over the trailing ``axes`` axes (with ``g``: its input gradient)."""
    count = math.prod(x.shape[x.ndim - axes :])
    rows = x.size // max(count, 1)
    return normalize(
        x,
        rows=rows,
        count=count,
        inner=max(count, 1),
        outer_stride=0,
        row_stride=count,
        eps=eps,
        per_row=False,
        g=g,
        weight=weight,
        bias=bias,
    )


def batch_norm(
    x: GpuArray,
    eps: float,
    weight: GpuArray | None = None,
    bias: GpuArray | None = None,
    g: GpuArray | None = None,
) -> GpuArray:
    """Batch norm of (N, C, ...) over every axis but 1 (with ``g``: its input gradient)."""
    n, c = x.shape[0], x.shape[1]
    inner = math.prod(x.shape[2:])
    return normalize(
        x,
        rows=c,
        count=n * inner,
        inner=max(inner, 1),
        outer_stride=c * inner,
        row_stride=inner,
        eps=eps,
        per_row=True,
        g=g,
        weight=weight,
        bias=bias,
    )


def layer_norm_backward(
    g: GpuArray, x: GpuArray, axes: int, eps: float, weight: GpuArray | None = None
) -> GpuArray:
    """The input gradient of `layer_norm` for the output gradient ``g``."""
    return layer_norm(x, axes, eps, weight, g=g)


def batch_norm_backward(
    g: GpuArray, x: GpuArray, eps: float, weight: GpuArray | None = None
) -> GpuArray:
    """The input gradient of `batch_norm` for the output gradient ``g``."""
    return batch_norm(x, eps, weight, g=g)


def _softmax(log: bool) -> Lowering:
    def lower_softmax(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
        return softmax(ins[0], int(attrs["axis"]), log=log)

    return lower_softmax


def _eps(attrs: Attrs) -> float:
    return float(attrs["eps"])


def _norm_axes(attrs: Attrs) -> int:
    return len(tuple(attrs["normalized_shape"]))


def _layer_norm(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return layer_norm(ins[0], _norm_axes(attrs), _eps(attrs), optional(ins, 1), optional(ins, 2))


def _layer_norm_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins[0], ins[1]
    return layer_norm_backward(g, x, _norm_axes(attrs), _eps(attrs), optional(ins, 2))


def _batch_norm(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return batch_norm(ins[0], _eps(attrs), optional(ins, 1), optional(ins, 2))


def _batch_norm_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins[0], ins[1]
    return batch_norm_backward(g, x, _eps(attrs), optional(ins, 2))


LOWERINGS: dict[str, Lowering] = {
    "softmax": _softmax(log=False),
    "log_softmax": _softmax(log=True),
    "layer_norm": _layer_norm,
    "layer_norm_backward": _layer_norm_backward,
    "batch_norm": _batch_norm,
    "batch_norm_backward": _batch_norm_backward,
}
