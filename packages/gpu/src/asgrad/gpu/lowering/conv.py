"""The conv family on the GPU: 2-D convolution as an implicit GEMM (``kernels/conv.wgsl``).

One kernel family computes the forward convolution, its input gradient (which is
also the transposed convolution) and its weight gradient; the im2col matrix is
gathered tile by tile into workgroup memory and never stored. Long reductions of
weight gradients are split (split-K) and their slices summed by a reduction.
"""

from __future__ import annotations

import struct

import numpy as np

from asgrad.gpu.device import fold_groups
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import render
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, hw, optional
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.tensor import TensorType
from asgrad.tensor.ops.conv import conv_attrs
from asgrad.tensor.ops.spatial import Pair, pair

__all__ = [
    "LOWERINGS",
    "WGSL_FILES",
    "ConvGeometry",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
]

WGSL_FILES: tuple[str, ...] = ("conv.wgsl", "reduction_cols.wgsl", "elementwise.wgsl")

_TILE = 64
_TK = 16
_SPLIT_MIN_K = 512  # no split-K chunk shorter than this
_SPLIT_TARGET_TILES = 256  # split until about this many workgroups
_MODES = {"forward": 0, "backward_input": 1, "backward_weight": 2}


class ConvGeometry:
    """Sizes of a convolution x (N, C, H, W) * w (O, C/G, kh, kw) -> y (N, O, OH, OW)."""

    __slots__ = ("C", "G", "H", "N", "O", "OH", "OW", "W", "dilation", "kernel", "padding",
                 "stride")  # fmt: skip

    def __init__(
        self,
        x_shape: tuple[int, ...],
        out_channels: int,
        kernel: Pair,
        y_hw: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        groups: int,
    ) -> None:
        self.N, self.C, self.H, self.W = (int(s) for s in x_shape)
        self.O = int(out_channels)
        self.OH, self.OW = int(y_hw[0]), int(y_hw[1])
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        self.G = int(groups)

    def pack(
        self, nb: int, M: int, N: int, K: int, nsplit: int = 1, kchunk: int = 0
    ) -> tuple[bytes, int]:
        """The kernel's params and its number of tiles (split-K: ``nsplit`` chunks of K)."""
        mtiles, ntiles = -(-M // _TILE), -(-N // _TILE)
        total = mtiles * ntiles * nb * nsplit
        kh, kw = self.kernel
        meta = struct.pack(
            "<20I8i4I",
            nb, self.G, M, N,
            K, mtiles, ntiles, total,
            self.N, self.C, self.H, self.W,
            self.O, self.OH, self.OW, self.C // self.G,
            self.O // self.G, kh, kw, kchunk or K,
            self.stride[0], self.stride[1], self.padding[0], self.padding[1],
            self.dilation[0], self.dilation[1], 0, 0,
            nb * M * N, 0, 0, 0,
        )  # fmt: skip
        return meta, total


def _check(*arrays: GpuArray) -> None:
    for a in arrays:
        if a.dtype != np.float32:
            raise GpuUnsupportedError(f"convolution on the GPU takes float32, got {a.dtype}")


def _launch(
    mode: str,
    geo: ConvGeometry,
    a: GpuArray,
    b: GpuArray,
    bias: GpuArray | None,
    out: GpuArray,
) -> GpuArray:
    kh, kw = geo.kernel
    cg, og = geo.C // geo.G, geo.O // geo.G
    if mode == "forward":
        nb, M, N, K = geo.N * geo.G, og, geo.OH * geo.OW, cg * kh * kw
    elif mode == "backward_input":
        nb, M, N, K = geo.N * geo.G, cg, geo.H * geo.W, og * kh * kw
    else:
        nb, M, N, K = geo.G, og, cg * kh * kw, geo.N * geo.OH * geo.OW
    if out.size == 0:
        return out
    if K == 0:  # an empty reduction (no channels, or an empty batch): zeros
        return elementwise("0.0", [], np.float32, out.shape, out=out)
    device = out.device
    code = _MODES[mode]
    has_bias = "true" if bias is not None else "false"
    pipe = device.pipeline(
        ("conv", code, has_bias),
        lambda: render("conv", MODE=code, HAS_BIAS=has_bias),
        ("uniform", "read", "read", "read", "write"),
    )
    nsplit, kchunk = _split_k(nb * -(-M // _TILE) * -(-N // _TILE), K) if bias is None else (1, K)
    meta, total = geo.pack(nb, M, N, K, nsplit, kchunk)
    target = out if nsplit == 1 else GpuArray.empty((nsplit, *out.shape), np.float32, device)
    bias_buffer = (bias if bias is not None else a).buffer
    groups = fold_groups(total, device.max_groups)
    device.dispatch(
        pipe, (device.params(meta), a.buffer, b.buffer, bias_buffer, target.buffer), groups
    )
    if nsplit == 1:
        return out
    summed = reduce_axis("sum", target.view((nsplit, out.size)), 0)
    return summed.view(out.shape)


def _split_k(tiles: int, K: int) -> tuple[int, int]:
    """``(nsplit, kchunk)``: split a long reduction when there are too few tiles to fill
    a GPU (weight gradients: K = N*OH*OW against a small M x N)."""
    if K < 2 * _SPLIT_MIN_K or tiles >= _SPLIT_TARGET_TILES:
        return 1, K
    nsplit = min(-(-K // _SPLIT_MIN_K), max(1, _SPLIT_TARGET_TILES // tiles))
    kchunk = -(-K // nsplit)
    kchunk = -(-kchunk // _TK) * _TK
    return -(-K // kchunk), kchunk


def conv2d(
    x: GpuArray,
    w: GpuArray,
    bias: GpuArray | None,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    out_hw: Pair,
) -> GpuArray:
    """Cross-correlation of x (N, C, H, W) with w (O, C/G, kh, kw), plus a bias (O,)."""
    _check(x, w, *([bias] if bias is not None else []))
    o, _, kh, kw = w.shape
    geo = ConvGeometry(x.shape, o, (kh, kw), out_hw, stride, padding, dilation, groups)
    out = GpuArray.empty((geo.N, o, *out_hw), np.float32, x.device)
    return _launch("forward", geo, w, x, bias, out)


def conv2d_backward_input(
    gy: GpuArray,
    w: GpuArray,
    x_shape: tuple[int, ...],
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    bias: GpuArray | None = None,
) -> GpuArray:
    """The adjoint of `conv2d` in x: gy (N, O, OH, OW) -> (N, C, H, W).

    With ``bias`` (one per input channel) it is ``conv_transpose2d``.
    """
    _check(gy, w, *([bias] if bias is not None else []))
    o, _, kh, kw = w.shape
    geo = ConvGeometry(
        x_shape, o, (kh, kw), (gy.shape[2], gy.shape[3]), stride, padding, dilation, groups
    )
    out = GpuArray.empty(tuple(x_shape), np.float32, gy.device)
    return _launch("backward_input", geo, w, gy, bias, out)


def conv2d_backward_weight(
    x: GpuArray,
    gy: GpuArray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> GpuArray:
    """The gradient of `conv2d` in w: (O, C/G, kh, kw) from x and gy."""
    _check(x, gy)
    o = gy.shape[1]
    geo = ConvGeometry(
        x.shape, o, kernel, (gy.shape[2], gy.shape[3]), stride, padding, dilation, groups
    )
    out = GpuArray.empty((o, geo.C // groups, *kernel), np.float32, x.device)
    return _launch("backward_weight", geo, gy, x, None, out)


def _conv2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    x, w = ins[0], ins[1]
    return conv2d(x, w, optional(ins, 2), stride, padding, dilation, groups, hw(out))


def _conv2d_backward_input(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    g, w, x = ins
    return conv2d_backward_input(g, w, x.shape, stride, padding, dilation, groups)


def _conv2d_backward_weight(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    stride, padding, dilation, groups = conv_attrs(attrs)
    kernel = pair(attrs["kernel_size"], "kernel_size", minimum=1)
    x, g = ins
    return conv2d_backward_weight(x, g, kernel, stride, padding, dilation, groups)


def _conv_transpose2d(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    # the transposed convolution is conv2d_backward_input, x playing the output gradient
    stride, padding, dilation, groups = conv_attrs(attrs)
    x, w = ins[0], ins[1]
    return conv2d_backward_input(
        x, w, tuple(out.shape), stride, padding, dilation, groups, bias=optional(ins, 2)
    )


LOWERINGS: dict[str, Lowering] = {
    "conv2d": _conv2d,
    "conv2d_backward_input": _conv2d_backward_input,
    "conv2d_backward_weight": _conv2d_backward_weight,
    "conv_transpose2d": _conv_transpose2d,
}
