"""Layer norm and batch norm on the GPU (``kernels/nn_norm.wgsl``), forward and input
gradient, one workgroup per normalised row or channel."""

from __future__ import annotations

import math
import struct

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.source import render

__all__ = ["batch_norm", "layer_norm", "normalize"]


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
        ("nn_norm", *flags),
        lambda: render("nn_norm", BACKWARD=flags[0], AFFINE=flags[1], PER_ROW=flags[2]),
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
