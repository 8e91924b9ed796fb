"""2-D convolution (NCHW, weights OIHW), its transpose, and its two backward ops.

The forward pass is im2col (a strided view of the padded input, copied once into
channel-major columns (G, C/G*kh*kw, N*OH*OW)) followed by one matrix product per
group. The weight gradient is one product with the same columns; the input
gradient is the adjoint: one product into column space, then col2im as one
strided add per kernel offset (kh*kw of them, never one per pixel). The transposed
convolution *is* that adjoint, so it shares the kernel. The backward ops are
registered ops with their own gradient rules, so higher-order gradients work:

    conv2d(x, w)                  -> y
    conv2d_backward_input(g, w, x)  = dL/dx   (x gives the shape only)
    conv2d_backward_weight(x, g)    = dL/dw   (kernel_size is an attribute)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn, same_dtype
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ops.spatial import (
    CONV_ATTRS,
    KERNEL_SIZE,
    OUTPUT_PADDING,
    Pair,
    channel_major,
    im2col,
    offset_slice,
    out_hw,
    pair,
    require_nchw,
    scratch,
    transpose_out_size,
)

CONV_TOLERANCE = (1e-4, 1e-5)


# -- attributes and shape rules ------------------------------------------------------
def conv_attrs(attrs: Attrs) -> tuple[Pair, Pair, Pair, int]:
    """``(stride, padding, dilation, groups)``, checked."""
    stride = pair(attrs["stride"], "stride", minimum=1)
    padding = pair(attrs["padding"], "padding")
    dilation = pair(attrs["dilation"], "dilation", minimum=1)
    groups = int(attrs["groups"])
    if groups < 1:
        raise ShapeError(f"groups must be a positive int, got {groups}")
    return stride, padding, dilation, groups


def _check_bias(types: Sequence[TensorType], channels: int, dtype: str) -> None:
    if len(types) == 3:
        b = types[2]
        if b.shape != (channels,):
            raise ShapeError(
                f"bias is {b}, expected shape [{channels}] (one value per output channel)"
            )
        same_dtype([types[0], b], "input and bias")
    elif len(types) != 2:
        raise ShapeError(f"takes (x, weight) or (x, weight, bias), got {len(types)} inputs")


def _conv_operands(
    types: Sequence[TensorType], weight_layout: str
) -> tuple[TensorType, TensorType, str]:
    """``(x, w, dtype)`` of a (transposed) convolution, with the checks both share."""
    if len(types) not in (2, 3):
        raise ShapeError(f"takes (x, weight) or (x, weight, bias), got {len(types)} inputs")
    x, w = types[0], types[1]
    require_nchw(x, "input")
    if len(w.shape) != 4:
        raise ShapeError(f"weight must have rank 4 ({weight_layout}), got {w}")
    return x, w, same_dtype([x, w], "input and weight")


def _infer_conv2d(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w, dtype = _conv_operands(types, "out, in/groups, kH, kW")
    stride, padding, dilation, groups = conv_attrs(attrs)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c % groups or o % groups:
        raise ShapeError(
            f"groups={groups} must divide both the input channels ({c}) and the output"
            f" channels ({o}) (input {x}, weight {w})"
        )
    if cg != c // groups:
        raise ShapeError(
            f"input {x} has {c} channels, so weight {w} needs {c // groups} input"
            f" channels per group (groups={groups}), not {cg}; check in_channels"
        )
    ohw = out_hw((h, wd), (kh, kw), stride, padding, dilation, "convolution")
    _check_bias(types, o, dtype)
    return TensorType((n, o, *ohw), dtype)


def _infer_conv2d_backward_input(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    g, w, x = types
    expected = _infer_conv2d([x, w], attrs)
    if g.shape != expected.shape:
        raise ShapeError(
            f"gradient {g} does not match the convolution output {expected} of {x} and {w}"
        )
    return TensorType(x.shape, same_dtype([g, w], "gradient and weight"))


def _infer_conv2d_backward_weight(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, g = types
    require_nchw(x, "input")
    require_nchw(g, "gradient")
    dtype = same_dtype([x, g], "input and gradient")
    stride, padding, dilation, groups = conv_attrs(attrs)
    kh, kw = pair(attrs["kernel_size"], "kernel_size", minimum=1)
    n, c, h, wd = x.shape
    o = g.shape[1]
    if c % groups or o % groups:
        raise ShapeError(
            f"groups={groups} must divide the input channels ({c}) and the gradient's"
            f" channels ({o})"
        )
    ohw = out_hw((h, wd), (kh, kw), stride, padding, dilation, "convolution")
    if g.shape != (n, o, *ohw):
        raise ShapeError(f"gradient {g} does not match the convolution output of {x}")
    return TensorType((o, c // groups, kh, kw), dtype)


def _infer_conv_transpose2d(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w, dtype = _conv_operands(types, "in, out/groups, kH, kW")
    stride, padding, dilation, groups = conv_attrs(attrs)
    output_padding = pair(attrs["output_padding"], "output_padding")
    n, c, h, wd = x.shape
    cin, og, kh, kw = w.shape
    if cin != c:
        raise ShapeError(
            f"input {x} has {c} channels but weight {w} expects {cin}"
            " (a transposed convolution's weight is (in, out/groups, kH, kW))"
        )
    if c % groups:
        raise ShapeError(f"groups={groups} must divide the input channels ({c})")
    if output_padding[0] >= stride[0] or output_padding[1] >= stride[1]:
        raise ShapeError(
            f"output_padding {list(output_padding)} must be smaller than stride {list(stride)}"
        )
    ohw = tuple(
        transpose_out_size(s, k, st, p, op, d)
        for s, k, st, p, op, d in zip(
            (h, wd), (kh, kw), stride, padding, output_padding, dilation, strict=True
        )
    )
    if ohw[0] < 1 or ohw[1] < 1:
        raise ShapeError(f"padding {list(padding)} leaves no output for input {x} and weight {w}")
    _check_bias(types, og * groups, dtype)
    return TensorType((n, og * groups, ohw[0], ohw[1]), dtype)


# -- kernels -----------------------------------------------------------------------------
def conv2d_kernel(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The numpy convolution (cross-correlation, as PyTorch); into ``out`` when given."""
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    o, _, kh, kw = w.shape
    cols, ohw = im2col(x, (kh, kw), st, pad, dil, groups)
    n = x.shape[0]
    gemm = scratch("gemm", (groups, o // groups, n * ohw[0] * ohw[1]), x.dtype)
    np.matmul(w.reshape(groups, o // groups, -1), cols, out=gemm)  # (G, O/G, N*OH*OW)
    by_image = gemm.reshape(o, n, ohw[0], ohw[1]).transpose(1, 0, 2, 3)
    if out is None:
        out = np.empty((n, o, ohw[0], ohw[1]), dtype=gemm.dtype)  # never a scratch view
    if b is None:
        np.copyto(out, by_image)
    else:
        np.add(by_image, b.reshape(1, o, 1, 1), out=out)
    return out


def _conv_adjoint(
    g: np.ndarray,
    w: np.ndarray,
    hw: Sequence[int],
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The adjoint of the convolution in its input: g (N, O, OH, OW) -> (N, C, *hw).

    Rows and columns of the padded input past the last window (stride remainders,
    output_padding) receive zeros.
    """
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    wt = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    cols = scratch("cols", (groups, cg * kh * kw, n * oh * ow), g.dtype)
    np.matmul(wt, channel_major(g, groups), out=cols)  # (G, C/G*kh*kw, N*OH*OW)
    cols6 = cols.reshape(groups * cg, kh, kw, n, oh, ow)
    hp, wp = hw[0] + 2 * padding[0], hw[1] + 2 * padding[1]
    dxp = scratch("col2im", (groups * cg, n, hp, wp), g.dtype)  # channel-major, like cols
    dxp.fill(0)
    for i in range(kh):
        for j in range(kw):
            dxp[offset_slice(i, j, stride, dilation, (oh, ow))] += cols6[:, i, j]
    inner = dxp[:, :, padding[0] : padding[0] + hw[0], padding[1] : padding[1] + hw[1]]
    if out is None:
        out = np.empty((n, groups * cg, hw[0], hw[1]), dtype=g.dtype)  # never a scratch view
    np.copyto(out, inner.transpose(1, 0, 2, 3))
    return out


def _conv2d_backward_input(
    g: np.ndarray,
    w: np.ndarray,
    x: np.ndarray,
    *,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    return _conv_adjoint(g, w, x.shape[2:], st, pad, dil, groups, out)


def _conv2d_backward_weight(
    x: np.ndarray,
    g: np.ndarray,
    *,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    kernel = pair(kernel_size, "kernel_size")
    cols, _ = im2col(x, kernel, st, pad, dil, groups)
    o = g.shape[1]
    if out is None:
        out = np.empty((o, x.shape[1] // groups, *kernel), dtype=np.result_type(x, g))
    # (G, O/G, K) straight into out (C-contiguous: the reshape is a view of it)
    np.matmul(
        channel_major(g, groups), cols.transpose(0, 2, 1), out=out.reshape(groups, o // groups, -1)
    )
    return out


def _conv_transpose2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    stride: Any,
    padding: Any,
    output_padding: Any,
    dilation: Any,
    groups: int,
) -> np.ndarray:
    st, pad, dil = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    opad = pair(output_padding, "output_padding")
    kh, kw = w.shape[2:]
    hw = (
        transpose_out_size(x.shape[2], kh, st[0], pad[0], opad[0], dil[0]),
        transpose_out_size(x.shape[3], kw, st[1], pad[1], opad[1], dil[1]),
    )
    out = _conv_adjoint(x, w, hw, st, pad, dil, groups)
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


# -- cases -----------------------------------------------------------------------------------
_CONV_CONFIGS: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any], str]] = [
    ((2, 3, 5, 5), (4, 3, 3, 3), {}, "3x3 valid"),
    ((2, 2, 6, 5), (3, 2, 3, 3), {"padding": (1, 1)}, "pad 1"),
    ((1, 2, 7, 6), (2, 2, 3, 2), {"stride": (2, 2), "padding": (1, 0)}, "stride 2"),
    ((1, 2, 7, 7), (2, 2, 3, 3), {"dilation": (2, 2), "padding": (2, 1)}, "dilation 2"),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": (1, 1)}, "groups 2"),
    ((1, 3, 4, 4), (3, 1, 2, 2), {"groups": 3, "stride": (2, 1)}, "depthwise"),
    ((2, 3, 4, 4), (5, 3, 1, 1), {}, "1x1"),
]


def _full_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """A case's attributes, the others at their defaults (the kernels take them all)."""
    return {**{a.name: a.default for a in CONV_ATTRS}, **attrs}


def _conv2d_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = [
        OpCase((randn(rng, *xs), randn(rng, *ws)), _full_attrs(a), label=label)
        for xs, ws, a, label in _CONV_CONFIGS
    ]
    cases.append(
        OpCase(
            (randn(rng, 2, 3, 5, 4), randn(rng, 4, 3, 3, 3), randn(rng, 4)),
            _full_attrs({"padding": (1, 1)}),
            label="with bias",
        )
    )
    return cases


def _conv2d_backward_input_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = []
    for xs, ws, a, label in _CONV_CONFIGS:
        attrs = _full_attrs(a)
        x, w = randn(rng, *xs), randn(rng, *ws)
        g = randn(rng, *conv2d_kernel(x, w, **attrs).shape)
        cases.append(OpCase((g, w, x), attrs, wrt=(0, 1), label=label))
    return cases


def _conv2d_backward_weight_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = []
    for xs, ws, a, label in _CONV_CONFIGS:
        attrs = _full_attrs(a)
        x, w = randn(rng, *xs), randn(rng, *ws)
        g = randn(rng, *conv2d_kernel(x, w, **attrs).shape)
        attrs["kernel_size"] = tuple(ws[2:])
        cases.append(OpCase((x, g), attrs, label=label))
    return cases


_TRANSPOSE_CONFIGS: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any], str]] = [
    ((2, 3, 4, 4), (3, 2, 3, 3), {}, "3x3"),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"stride": (2, 2), "padding": (1, 1)}, "stride 2 pad 1"),
    (
        (1, 2, 3, 3),
        (2, 2, 3, 2),
        {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2)},
        "output_padding",
    ),
    ((1, 4, 3, 3), (4, 1, 3, 3), {"groups": 2, "dilation": (2, 1)}, "groups 2 dilation"),
]


def _conv_transpose2d_cases(rng: np.random.Generator) -> list[OpCase]:
    cases = [
        OpCase(
            (randn(rng, *xs), randn(rng, *ws)),
            _full_attrs(a),
            label=label,
        )
        for xs, ws, a, label in _TRANSPOSE_CONFIGS
    ]
    cases.append(
        OpCase(
            (randn(rng, 2, 3, 3, 3), randn(rng, 3, 2, 2, 2), randn(rng, 2)),
            _full_attrs({"stride": (2, 2)}),
            label="with bias",
        )
    )
    return cases


register_op(
    OpDef(
        name="conv2d",
        family="conv",
        infer=_infer_conv2d,
        kernel=accumulating(conv2d_kernel),
        arity=None,
        tolerance=CONV_TOLERANCE,
        cases=_conv2d_cases,
        doc="2-D convolution, NCHW/OIHW: stride, padding, dilation, groups, bias",
        attrs=CONV_ATTRS,
        writes_out=True,
    )
)
register_op(
    OpDef(
        name="conv2d_backward_input",
        family="conv",
        infer=_infer_conv2d_backward_input,
        kernel=accumulating(_conv2d_backward_input),
        arity=3,
        tolerance=CONV_TOLERANCE,
        cases=_conv2d_backward_input_cases,
        doc="conv2d's input gradient from (g, w); x gives the shape",
        attrs=CONV_ATTRS,
        writes_out=True,
    )
)
register_op(
    OpDef(
        name="conv2d_backward_weight",
        family="conv",
        infer=_infer_conv2d_backward_weight,
        kernel=accumulating(_conv2d_backward_weight),
        arity=2,
        tolerance=CONV_TOLERANCE,
        cases=_conv2d_backward_weight_cases,
        doc="conv2d's weight gradient from (x, g)",
        attrs=(KERNEL_SIZE, *CONV_ATTRS),
        writes_out=True,
    )
)
register_op(
    OpDef(
        name="conv_transpose2d",
        family="conv",
        infer=_infer_conv_transpose2d,
        kernel=accumulating(_conv_transpose2d),
        arity=None,
        tolerance=CONV_TOLERANCE,
        cases=_conv_transpose2d_cases,
        doc="transposed 2-D convolution, weight (in, out/groups, kH, kW)",
        attrs=(*CONV_ATTRS, OUTPUT_PADDING),
    )
)
