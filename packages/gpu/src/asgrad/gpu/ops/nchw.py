"""NCHW ops: convolution as im2col + batched matmul (and col2im for its adjoint), pooling."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from asgrad.gpu.array import GpuArray
from asgrad.gpu.device import fold_groups
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.ops.matmul import MatrixView, matmul
from asgrad.gpu.ops.reduce import reduce_axis
from asgrad.gpu.source import render

__all__ = [
    "Pair",
    "col2im",
    "conv2d",
    "conv2d_input_grad",
    "conv2d_weight_grad",
    "im2col",
    "pool2d",
]

Pair = tuple[int, int]


def _geometry_params(
    total: int,
    c: int,
    hw: Sequence[int],
    kernel: Pair,
    ohw: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> bytes:
    return struct.pack(
        "<8I6i2I",
        total, c, hw[0], hw[1], kernel[0], kernel[1], ohw[0], ohw[1],
        stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], 0, 0,
    )  # fmt: skip


def _check_f32(*xs: GpuArray) -> None:
    for x in xs:
        if x.dtype not in (np.float32, np.float64):
            raise GpuUnsupportedError(f"NCHW ops on the GPU take float32, got {x.dtype}")


def im2col(
    x: GpuArray, kernel: Pair, ohw: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> GpuArray:
    """(N, C, kh, kw, OH, OW) columns of ``x`` (zeros where a window leaves the input)."""
    _check_f32(x)
    n, c, h, w = x.shape
    cols = GpuArray.empty((n, c, kernel[0], kernel[1], ohw[0], ohw[1]), x.dtype, x.device)
    device = x.device
    pipe = device.pipeline(("im2col",), lambda: render("im2col"), ("uniform", "read", "write"))
    params = device.params(
        _geometry_params(cols.size, c, (h, w), kernel, ohw, stride, padding, dilation)
    )
    groups = fold_groups(-(-cols.size // 256), device.max_groups)
    device.dispatch(pipe, (params, x.buffer, cols.buffer), groups)
    return cols


def col2im(
    cols: GpuArray,
    shape: tuple[int, int, int, int],
    kernel: Pair,
    ohw: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> GpuArray:
    """The adjoint of :func:`im2col`: (N, C, kh, kw, OH, OW) summed back into ``shape``."""
    _, c, h, w = shape
    dx = GpuArray.empty(shape, cols.dtype, cols.device)
    device = cols.device
    pipe = device.pipeline(("col2im",), lambda: render("col2im"), ("uniform", "read", "write"))
    params = device.params(
        _geometry_params(dx.size, c, (h, w), kernel, ohw, stride, padding, dilation)
    )
    groups = fold_groups(-(-dx.size // 256), device.max_groups)
    device.dispatch(pipe, (params, cols.buffer, dx.buffer), groups)
    return dx


def conv2d(
    x: GpuArray,
    w: GpuArray,
    ohw: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> GpuArray:
    """Cross-correlation (PyTorch's conv2d) without bias: (N, O, OH, OW)."""
    _check_f32(x, w)
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    cols = im2col(x, (kh, kw), ohw, stride, padding, dilation)
    k, p = cg * kh * kw, ohw[0] * ohw[1]
    a = MatrixView(w, (groups, o // groups, k))
    b = MatrixView(cols, (n, groups, k, p))
    return matmul(a, b).view((n, o, ohw[0], ohw[1]))


def conv2d_input_grad(
    g: GpuArray,
    w: GpuArray,
    hw: Sequence[int],
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> GpuArray:
    """The adjoint of :func:`conv2d` in its input: g (N, O, OH, OW) -> (N, C, *hw)."""
    _check_f32(g, w)
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    k = cg * kh * kw
    wt = MatrixView(w, (groups, o // groups, k)).transpose()  # (G, K, O/G)
    gm = MatrixView(g, (n, groups, o // groups, oh * ow))
    cols = matmul(wt, gm).view((n, groups * cg, kh, kw, oh, ow))
    return col2im(
        cols, (n, groups * cg, hw[0], hw[1]), (kh, kw), (oh, ow), stride, padding, dilation
    )


def conv2d_weight_grad(
    x: GpuArray,
    g: GpuArray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> GpuArray:
    """The weight gradient: sum over the batch of g @ cols^T, as (O, C/G, kh, kw)."""
    _check_f32(x, g)
    n, c, _, _ = x.shape
    _, o, oh, ow = g.shape
    cols = im2col(x, kernel, (oh, ow), stride, padding, dilation)
    k, p = c // groups * kernel[0] * kernel[1], oh * ow
    gm = MatrixView(g, (n, groups, o // groups, p))
    colsT = MatrixView(cols, (n, groups, k, p)).transpose()  # (N, G, P, K)
    per_sample = matmul(gm, colsT)  # (N, G, O/G, K)
    if n == 1:
        return per_sample.view((o, c // groups, kernel[0], kernel[1]))
    summed = reduce_axis("sum", per_sample, 0, out_dtype=per_sample.dtype)
    return summed.view((o, c // groups, kernel[0], kernel[1]))


_POOL_INPUTS = {
    "max_forward": 1,
    "avg_forward": 1,
    "adaptive_forward": 1,
    "max_select": 2,
    "max_backward": 2,
    "avg_backward": 2,
    "adaptive_backward": 2,
}


def pool2d(
    entry: str,
    a: GpuArray,
    b: GpuArray | None,
    out_shape: tuple[int, ...],
    hw: Pair,
    ohw: Pair,
    kernel: Pair = (1, 1),
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    include_pad: bool = True,
) -> GpuArray:
    """One of the pooling kernels of ``pool2d.wgsl`` (see its header for ``entry``)."""
    _check_f32(a)
    if entry not in _POOL_INPUTS:
        raise GpuUnsupportedError(f"no pooling kernel {entry!r}")
    out = GpuArray.empty(out_shape, a.dtype, a.device)
    if out.size == 0:
        return out
    device = a.device
    pipe = device.pipeline(
        ("pool2d", entry),
        lambda: render("pool2d", ENTRY=entry),
        ("uniform", "read", "read", "write"),
    )
    params = device.params(
        struct.pack(
            "<5I6iI",
            out.size,
            hw[0],
            hw[1],
            ohw[0],
            ohw[1],
            kernel[0],
            kernel[1],
            stride[0],
            stride[1],
            padding[0],
            padding[1],
            int(include_pad),
        )
    )
    groups = fold_groups(-(-out.size // 256), device.max_groups)
    second = b.buffer if b is not None else a.buffer
    device.dispatch(pipe, (params, a.buffer, second, out.buffer), groups)
    return out
