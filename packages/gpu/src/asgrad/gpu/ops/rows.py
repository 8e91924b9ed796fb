"""Row kernels, one workgroup per row: softmax and log-softmax."""

from __future__ import annotations

import math
import struct

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.source import render

__all__ = ["softmax"]


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
