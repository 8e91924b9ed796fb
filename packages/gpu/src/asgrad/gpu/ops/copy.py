"""Contiguous buffer copies inside a compute pass."""

from __future__ import annotations

import struct

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.source import render

__all__ = ["copy_into"]


def copy_into(src: GpuArray, dst: GpuArray) -> GpuArray:
    """Record ``dst[...] = src`` (same byte size) with the vec4 copy kernel.

    Unlike an encoder-level buffer copy, this does not end the open compute pass.
    """
    device = src.device
    words = -(-src.nbytes // 16)  # pooled buffers are multiples of 256 bytes
    pipe = device.pipeline(("copy",), lambda: render("copy"), ("uniform", "read", "write"))
    params = device.params(struct.pack("<4I", words, 0, 0, 0))
    groups = fold_groups(-(-words // 256), device.max_groups)
    device.dispatch(pipe, (params, src.buffer, dst.buffer), groups)
    return dst
