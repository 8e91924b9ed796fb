"""Row kernels, one workgroup per row: softmax, log-softmax, layer norm."""

from __future__ import annotations

import math
import struct

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.source import render

__all__ = ["layer_norm", "softmax"]


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
        ("softmax", flag),
        lambda: render("softmax", LOG=flag),
        ("uniform", "read", "write"),
    )
    meta = struct.pack("<4I", outer, r, inner, 0)
    groups = fold_groups(outer * inner, device.max_groups)
    device.dispatch(pipe, (device.params(meta), x.buffer, out.buffer), groups)
    return out


def layer_norm(
    x: GpuArray,
    gamma: GpuArray | None = None,
    beta: GpuArray | None = None,
    eps: float = 1e-5,
    out: GpuArray | None = None,
) -> GpuArray:
    """Normalise float32 ``x`` over its last axis, then scale and shift."""
    if x.dtype != np.float32:
        raise GpuUnsupportedError(f"layer_norm on the GPU takes float32, got {x.dtype}")
    if (gamma is None) != (beta is None):
        raise GpuUnsupportedError("layer_norm takes both gamma and beta, or neither")
    out = out or GpuArray.empty(x.shape, np.float32, x.device)
    if x.size == 0:
        return out
    r = x.shape[-1]
    rows = x.size // r
    device = x.device
    affine = gamma is not None
    flag = "true" if affine else "false"
    pipe = device.pipeline(
        ("layer_norm", flag),
        lambda: render("layer_norm", AFFINE=flag),
        ("uniform", "read", "read", "read", "write"),
    )
    meta = struct.pack("<4If", rows, r, 0, 0, eps)
    g = gamma.buffer if gamma is not None else x.buffer
    b = beta.buffer if beta is not None else x.buffer
    groups = fold_groups(rows, device.max_groups)
    device.dispatch(pipe, (device.params(meta), x.buffer, g, b, out.buffer), groups)
    return out
