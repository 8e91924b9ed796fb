"""The random family on the GPU: seeded dropout (``kernels/random.wgsl``) and the
samplers ``rand_like`` / ``randn_like`` (``kernels/random_sample.wgsl``).

The mask is the counter-based hash of ``asgrad.tensor.ops.random.dropout_keep``
computed in u32 arithmetic, so the GPU and the CPU drop the same elements for the
same seed (a seed held as int64 must fit in int32: the GPU stores it as an i32).
"""

from __future__ import annotations

import struct

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, zero
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.tensor import TensorType
from asgrad.tensor.ops.random import dropout_threshold

__all__ = ["LOWERINGS", "WGSL_FILES", "dropout", "sample"]

WGSL_FILES: tuple[str, ...] = ("random.wgsl", "random_sample.wgsl", "elementwise.wgsl")

# The body of ``sample(i, k1, k2)`` (``h1`` is the first hash) for each sampler.
_SAMPLERS = {
    "uniform": "    return f32(h1 >> 8u) * U24;",
    "normal": (
        # ln(u1) from w = 1 - u1 (exact): a series where u1 is near 1, whose log has
        # too large an absolute error for sqrt(-2 ln u1) near 0.
        "    let w = f32(16777215u - (h1 >> 8u)) * U24;\n"
        "    var l = log(1.0 - w);\n"
        "    if (w < 0.0625) {\n"
        "        l = -w * (1.0 + w * (0.5 + w * (1.0 / 3.0 + w * (0.25 + w * (0.2 + w / 6.0)))));\n"
        "    }\n"
        "    let u2 = f32(pcg(pcg(i) ^ k2) >> 8u) * U24;\n"
        "    return sqrt(-2.0 * l) * cos(TAU * u2);"
    ),
}


def dropout(x: GpuArray, seed: GpuArray, p: float) -> GpuArray:
    """Zero each element of float32 (or float16) ``x`` with probability ``p``; scale the
    rest by ``1 / (1 - p)`` rounded to ``x``'s dtype, as the numpy kernel does. ``seed``
    is an integer scalar on the device."""
    if x.dtype not in (np.float32, np.float16):
        raise GpuUnsupportedError(f"dropout on the GPU takes float32 or float16, got {x.dtype}")
    if seed.wgsl != "i32" or seed.size != 1:
        raise GpuUnsupportedError(f"dropout's seed must be an integer scalar, got {seed}")
    out = GpuArray.empty(x.shape, x.dtype, x.device)
    t = x.wgsl
    if p >= 1.0:
        return elementwise(zero(t), [], x.dtype, out.shape, out=out)
    if x.size == 0:
        return out
    threshold = dropout_threshold(p) if p > 0.0 else 0
    scale = float(x.dtype.type(1.0 / (1.0 - p)))  # a float16 value is an f32 one too
    device = x.device
    pipe = device.pipeline(
        ("random", t), lambda: render("random", T=t), ("uniform", "read", "read", "write")
    )
    meta = struct.pack("<4If", x.size, threshold, 0, 0, scale)
    groups = fold_groups(-(-x.size // 256), device.max_groups)
    device.dispatch(pipe, (device.params(meta), x.buffer, seed.buffer, out.buffer), groups)
    return out


def _dropout(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    x, seed = ins
    return dropout(x, seed, float(attrs["p"]))


def sample(like: GpuArray, seed: GpuArray, kind: str) -> GpuArray:
    """Float32 samples of ``like``'s shape: ``kind`` is ``"uniform"`` or ``"normal"``."""
    if like.dtype != np.float32:
        raise GpuUnsupportedError(f"random samples on the GPU are float32, got {like.dtype}")
    if seed.wgsl != "i32" or seed.size != 1:
        raise GpuUnsupportedError(f"a sampler's seed must be an integer scalar, got {seed}")
    out = GpuArray.empty(like.shape, np.float32, like.device)
    if out.size == 0:
        return out
    device = like.device
    pipe = device.pipeline(
        ("random_sample", kind),
        lambda: render("random_sample", SAMPLE=_SAMPLERS[kind]),
        ("uniform", "read", "write"),
    )
    groups = fold_groups(-(-out.size // 256), device.max_groups)
    meta = struct.pack("<4I", out.size, 0, 0, 0)
    device.dispatch(pipe, (device.params(meta), seed.buffer, out.buffer), groups)
    return out


def _rand_like(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return sample(ins[0], ins[1], "uniform")


def _randn_like(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return sample(ins[0], ins[1], "normal")


LOWERINGS: dict[str, Lowering] = {
    "dropout": _dropout,
    "rand_like": _rand_like,
    "randn_like": _randn_like,
}
