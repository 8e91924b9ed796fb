"""The pool family on the GPU (``kernels/pool.wgsl``): one thread per element written.

Forward kernels run one thread per output; backward kernels one thread per input
pixel, gathering from the windows that hold it, so no atomics are needed.
"""

from __future__ import annotations

import struct

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, hw
from asgrad.tensor import TensorType
from asgrad.tensor.ops.spatial import Pair, window_attrs

__all__ = [
    "LOWERINGS",
    "WGSL_FILES",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "max_pool2d",
    "max_pool2d_backward",
    "max_pool2d_select",
]

WGSL_FILES: tuple[str, ...] = ("pool.wgsl",)

_MODES = {
    "max_select": 0,
    "max_backward": 1,
    "avg": 2,
    "avg_backward": 3,
    "adaptive": 4,
    "adaptive_backward": 5,
    "max": 6,
}


def _launch(
    mode: str,
    x_shape: tuple[int, ...],
    out_hw: Pair,
    src: GpuArray,
    src2: GpuArray,
    kernel: Pair = (1, 1),
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    include_pad: bool = True,
) -> GpuArray:
    for a in (src, src2):
        if a.dtype != np.float32:
            raise GpuUnsupportedError(f"pooling on the GPU takes float32, got {a.dtype}")
    n, c, h, w = x_shape
    backward = mode.endswith("backward")
    shape = (n, c, h, w) if backward else (n, c, *out_hw)
    out = GpuArray.empty(shape, np.float32, src.device)
    if out.size == 0:
        return out
    device = src.device
    code = _MODES[mode]
    pipe = device.pipeline(
        ("pool", code),
        lambda: render("pool", MODE=code),
        ("uniform", "read", "read", "write"),
    )
    meta = struct.pack(
        "<8I4i",
        out.size, h, w, out_hw[0],
        out_hw[1], kernel[0], kernel[1], int(include_pad),
        stride[0], stride[1], padding[0], padding[1],
    )  # fmt: skip
    groups = fold_groups(-(-out.size // 256), device.max_groups)
    device.dispatch(pipe, (device.params(meta), src.buffer, src2.buffer, out.buffer), groups)
    return out


def max_pool2d(x: GpuArray, kernel: Pair, stride: Pair, padding: Pair, out_hw: Pair) -> GpuArray:
    """The maximum of each window (padding never wins; a NaN does, as numpy's)."""
    return _launch("max", x.shape, out_hw, x, x, kernel, stride, padding)


def max_pool2d_select(
    h: GpuArray, x: GpuArray, kernel: Pair, stride: Pair, padding: Pair, out_hw: Pair
) -> GpuArray:
    """``h`` at each window's argmax of ``x``."""
    return _launch("max_select", x.shape, out_hw, x, h, kernel, stride, padding)


def max_pool2d_backward(
    g: GpuArray, x: GpuArray, kernel: Pair, stride: Pair, padding: Pair
) -> GpuArray:
    """``g`` scattered to each window's argmax of ``x`` (summed where windows share it)."""
    return _launch("max_backward", x.shape, hw(g), x, g, kernel, stride, padding)


def avg_pool2d(
    x: GpuArray, kernel: Pair, stride: Pair, padding: Pair, out_hw: Pair, include_pad: bool
) -> GpuArray:
    """The mean of each window (``include_pad=False``: over its real pixels only)."""
    return _launch("avg", x.shape, out_hw, x, x, kernel, stride, padding, include_pad)


def avg_pool2d_backward(
    g: GpuArray,
    x_shape: tuple[int, ...],
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    include_pad: bool,
) -> GpuArray:
    """The adjoint of `avg_pool2d`: each window's share of ``g`` spread over it."""
    return _launch("avg_backward", x_shape, hw(g), g, g, kernel, stride, padding, include_pad)


def adaptive_avg_pool2d(x: GpuArray, out_hw: Pair) -> GpuArray:
    """Mean pooling to ``out_hw`` with PyTorch's window bounds."""
    return _launch("adaptive", x.shape, out_hw, x, x)


def adaptive_avg_pool2d_backward(g: GpuArray, x_shape: tuple[int, ...]) -> GpuArray:
    """The adjoint of `adaptive_avg_pool2d`."""
    return _launch("adaptive_backward", x_shape, hw(g), g, g)


def _max_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    return max_pool2d(ins[0], kernel, stride, padding, hw(out))


def _max_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    g, x = ins
    return max_pool2d_backward(g, x, kernel, stride, padding)


def _max_pool2d_select(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    h, x = ins
    return max_pool2d_select(h, x, kernel, stride, padding, hw(out))


def _include_pad(attrs: Attrs) -> bool:
    return bool(attrs["count_include_pad"])


def _avg_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    return avg_pool2d(ins[0], kernel, stride, padding, hw(out), _include_pad(attrs))


def _avg_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    kernel, stride, padding = window_attrs(attrs)
    g, x = ins
    return avg_pool2d_backward(g, x.shape, kernel, stride, padding, _include_pad(attrs))


def _adaptive_avg_pool2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return adaptive_avg_pool2d(ins[0], hw(out))


def _adaptive_avg_pool2d_backward(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    g, x = ins
    return adaptive_avg_pool2d_backward(g, x.shape)


LOWERINGS: dict[str, Lowering] = {
    "max_pool2d": _max_pool2d,
    "max_pool2d_backward": _max_pool2d_backward,
    "max_pool2d_select": _max_pool2d_select,
    "avg_pool2d": _avg_pool2d,
    "avg_pool2d_backward": _avg_pool2d_backward,
    "adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
}
