"""The random family on the GPU: seeded dropout (``kernels/random.wgsl``).

The mask is the counter-based hash of ``asgrad.tensor.ops.random.dropout_keep``
computed in u32 arithmetic, so the GPU and the CPU drop the same elements for the
same seed (a seed held as int64 must fit in int32: the GPU stores it as an i32).
"""

from __future__ import annotations

import struct

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.source import render
from asgrad.tensor import TensorType
from asgrad.tensor.ops.random import dropout_threshold

__all__ = ["LOWERINGS", "WGSL_FILES", "dropout"]

WGSL_FILES: tuple[str, ...] = ("random.wgsl", "elementwise.wgsl")


def dropout(x: GpuArray, seed: GpuArray, p: float) -> GpuArray:
    """Zero each element of float32 ``x`` with probability ``p``; scale the rest by
    ``1 / (1 - p)``. ``seed`` is an integer scalar on the device."""
    if x.dtype != np.float32:
        raise GpuUnsupportedError(f"dropout on the GPU takes float32, got {x.dtype}")
    if seed.wgsl != "i32" or seed.size != 1:
        raise GpuUnsupportedError(f"dropout's seed must be an integer scalar, got {seed}")
    out = GpuArray.empty(x.shape, np.float32, x.device)
    if p >= 1.0:
        return elementwise("0.0", [], np.float32, out.shape, out=out)
    if x.size == 0:
        return out
    threshold = dropout_threshold(p) if p > 0.0 else 0
    scale = float(np.float32(1.0 / (1.0 - p)))
    device = x.device
    pipe = device.pipeline(
        ("random",), lambda: render("random"), ("uniform", "read", "read", "write")
    )
    meta = struct.pack("<4If", x.size, threshold, 0, 0, scale)
    groups = fold_groups(-(-x.size // 256), device.max_groups)
    device.dispatch(pipe, (device.params(meta), x.buffer, seed.buffer, out.buffer), groups)
    return out


def _dropout(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    x, seed = ins
    return dropout(x, seed, float(attrs["p"]))


LOWERINGS: dict[str, Lowering] = {"dropout": _dropout}
