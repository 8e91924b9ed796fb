"""The conv family on the GPU: 2-D convolution as an implicit GEMM on the matmul tiles.

The forward convolution, its input gradient (which is also the transposed
convolution) and its weight gradient are each one batched product of
`asgrad.gpu.lowering.linalg.matmul_into` whose operands are gathered
(`asgrad.gpu.lowering.linalg.Gather`): the im2col matrix is read tile by tile from
the input into workgroup memory and never stored, the geometry is compiled into the
gathers as constants, and the tile (and split-K for the long reductions of weight
gradients) is chosen like a matmul's: tuned per device where tuning is on
(`asgrad.gpu.lowering._matmul_tuning`). A bias is the product's epilogue.

With ``cg = C / G`` and ``og = O / G`` (x (N, C, H, W), w (O, cg, kh, kw), gy (N, O,
OH, OW)), batched over (n, g) or g:

* forward: ``y[n, g*og + m, s] = sum_k w[g*og + m, k] * cols(x)[k, s]``, M = og,
  N = OH*OW, K = cg*kh*kw;
* input gradient: ``dx[n, g*cg + m, p] = sum_k w^T[m, k] * taps(gy)[k, p]``, M = cg,
  N = H*W, K = og*kh*kw;
* weight gradient: ``dw[g*og + m, q] = sum_k gy[m, k] * cols(x)^T[k, q]``, M = og,
  N = cg*kh*kw, K = N*OH*OW.
"""

from __future__ import annotations

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering._matmul_tuning import SPLITS
from asgrad.gpu.lowering.common import Attrs, Lowering, hw, optional
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.linalg import Epilogue, Gather, MatrixView, matmul_into
from asgrad.tensor import TensorType
from asgrad.tensor.ir import scalar
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

WGSL_FILES: tuple[str, ...] = (
    "linalg_matmul_tiled.wgsl",
    "prelude.wgsl",
    "reduction_cols_block.wgsl",
    "reduction_cols.wgsl",
    "elementwise.wgsl",
)

# The most pieces K is cut into (the tuner's largest split), which the grid must fit.
MAX_PIECES = max(SPLITS)

# The axis along which each gather reads consecutive memory (A, B), per mode.
_LAYOUTS = {
    "forward": ("k", "n"),
    "backward_input": ("k", "n"),
    "backward_weight": ("k", "k"),
}


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

    def constants(self) -> str:
        """The geometry as WGSL constants (``CV_*``) the gathers divide by."""
        kh, kw = self.kernel
        unsigned = {
            "G": self.G, "C": self.C, "H": self.H, "W": self.W, "O": self.O,
            "OH": self.OH, "OW": self.OW, "CG": self.C // self.G, "OG": self.O // self.G,
            "KH": kh, "KW": kw, "TAPS": kh * kw, "HW": self.OH * self.OW,
        }  # fmt: skip
        signed = {
            "SH": self.stride[0], "SW": self.stride[1], "PH": self.padding[0],
            "PW": self.padding[1], "DH": self.dilation[0], "DW": self.dilation[1],
        }  # fmt: skip
        lines = [f"const CV_{k}: u32 = {int(v)}u;" for k, v in unsigned.items()]
        lines += [f"const CV_{k}: i32 = {int(v)}i;" for k, v in signed.items()]
        return "\n".join(lines)


# x[n, c, oy*sh + i*dh - ph, ox*sw + j*dw - pw], zero in the padding
_LOAD_X = """fn load_x(n: u32, c: u32, oy: u32, ox: u32, i: u32, j: u32) -> f32 {
    let y = i32(oy) * CV_SH + i32(i) * CV_DH - CV_PH;
    let x = i32(ox) * CV_SW + i32(j) * CV_DW - CV_PW;
    if (y < 0 || x < 0 || y >= i32(CV_H) || x >= i32(CV_W)) {
        return 0.0;
    }
    return B[((n * CV_C + c) * CV_H + u32(y)) * CV_W + u32(x)];
}"""

# load_a(z, m, k, kend) and load_b(z, k, col, kend) per mode; z is the batch element
# (n * G + g, or g for the weight gradient)
_GATHERS = {
    "forward": """fn load_a(z: u32, m: u32, k: u32, kend: u32) -> f32 {
    if (m >= params.M || k >= kend) {
        return 0.0;
    }
    return A[((z % CV_G) * CV_OG + m) * params.K + k];
}

fn load_b(z: u32, k: u32, col: u32, kend: u32) -> f32 {
    if (k >= kend || col >= params.N) {
        return 0.0;
    }
    let c = k / CV_TAPS;
    let r = k % CV_TAPS;
    return load_x(z / CV_G, (z % CV_G) * CV_CG + c, col / CV_OW, col % CV_OW,
                  r / CV_KW, r % CV_KW);
}""",
    "backward_input": """fn load_a(z: u32, m: u32, k: u32, kend: u32) -> f32 {
    if (m >= params.M || k >= kend) {
        return 0.0;
    }
    let o = k / CV_TAPS;
    let r = k % CV_TAPS;
    return A[(((z % CV_G) * CV_OG + o) * CV_CG + m) * CV_TAPS + r];
}

// the taps of gy that input pixel col = (y, x) receives through offset (i, j)
fn load_b(z: u32, k: u32, col: u32, kend: u32) -> f32 {
    if (k >= kend || col >= params.N) {
        return 0.0;
    }
    let o = k / CV_TAPS;
    let r = k % CV_TAPS;
    let ty = i32(col / CV_W) + CV_PH - i32(r / CV_KW) * CV_DH;
    let tx = i32(col % CV_W) + CV_PW - i32(r % CV_KW) * CV_DW;
    if (ty < 0 || tx < 0 || ty % CV_SH != 0 || tx % CV_SW != 0) {
        return 0.0;
    }
    let oy = u32(ty / CV_SH);
    let ox = u32(tx / CV_SW);
    if (oy >= CV_OH || ox >= CV_OW) {
        return 0.0;
    }
    let n = z / CV_G;
    return B[((n * CV_O + (z % CV_G) * CV_OG + o) * CV_OH + oy) * CV_OW + ox];
}""",
    "backward_weight": """fn load_a(z: u32, m: u32, k: u32, kend: u32) -> f32 {
    if (m >= params.M || k >= kend) {
        return 0.0;
    }
    let n = k / CV_HW;
    let s = k % CV_HW;
    return A[(n * CV_O + z * CV_OG + m) * CV_HW + s];
}

fn load_b(z: u32, k: u32, col: u32, kend: u32) -> f32 {
    if (k >= kend || col >= params.N) {
        return 0.0;
    }
    let n = k / CV_HW;
    let s = k % CV_HW;
    let c = col / CV_TAPS;
    let r = col % CV_TAPS;
    return load_x(n, z * CV_CG + c, s / CV_OW, s % CV_OW, r / CV_KW, r % CV_KW);
}""",
}


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
    batch: tuple[int, ...]
    if mode == "forward":
        batch, M, N, K = (geo.N, geo.G), og, geo.OH * geo.OW, cg * kh * kw
    elif mode == "backward_input":
        batch, M, N, K = (geo.N, geo.G), cg, geo.H * geo.W, og * kh * kw
    else:
        batch, M, N, K = (geo.G,), og, cg * kh * kw, geo.N * geo.OH * geo.OW
    if out.size == 0:
        return out
    if K == 0:  # an empty reduction (no channels, or an empty batch): zeros
        return elementwise("0.0", [], np.float32, out.shape, out=out)
    gather = Gather(f"conv-{mode}", geo.constants() + "\n\n" + _LOAD_X + "\n\n" + _GATHERS[mode],
                    _LAYOUTS[mode])  # fmt: skip
    epilogue = None
    if bias is not None:  # one per output channel: broadcast over (n, g, m, pixel)
        per_channel = Operand.of(bias).reshape((1, geo.G, M, 1))
        epilogue = Epilogue(scalar.arg(0) + scalar.arg(1), [per_channel])
    device = out.device
    # images per launch: the grid's z runs over them, the groups and the pieces of K
    images = max(1, device.max_groups // MAX_PIECES // geo.G)
    if len(batch) == 1 or images >= geo.N:
        _product(a, b, out, batch, M, N, K, 0, gather, epilogue)
        return out
    image = out.size // geo.N
    for n0 in range(0, geo.N, images):
        n1 = min(geo.N, n0 + images)
        part = GpuArray.empty((n1 - n0, *out.shape[1:]), np.float32, device)
        _product(a, b, part, (n1 - n0, geo.G), M, N, K, n0 * geo.G, gather, epilogue)
        device.copy(part.buffer, out.buffer, part.size * 4, dst_offset=n0 * image * 4)
    return out


def _product(
    a: GpuArray,
    b: GpuArray,
    out: GpuArray,
    batch: tuple[int, ...],
    M: int,
    N: int,
    K: int,
    first: int,
    gather: Gather,
    epilogue: Epilogue | None,
) -> None:
    """One launch of the gathered product over ``batch`` ((images, G), or (G,)), its
    batch elements numbered from ``first``: views whose batch strides make each
    element's base its number (n * G + g, or g)."""
    index = (batch[1], 1) if len(batch) == 2 else (1,)
    va = MatrixView(a, (*batch, M, K), (*index, 0, 0), first)
    vb = MatrixView(b, (*batch, K, N), (*index, 0, 0), first)
    matmul_into(va, vb, out.view((*batch, M, N)), epilogue=epilogue, gather=gather)


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
