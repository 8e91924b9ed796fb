"""``conv3d``: a sum over the kernel's depth taps of ``conv2d`` on strided depth slices.

For input (N, C, D, H, W) and weight (O, C/groups, kD, kH, kW), output depth d reads
input depths ``d * stride + k * dilation - padding``; each tap k is one ``conv2d``
over the (N * D_out, C, H, W) slice it reads, with the weight's k-th (kH, kW) plane.
The op expands into those (``OpDef.expand``): its gradient and GPU kernels are
``conv2d``'s and the slices'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import ShapeError
from asgrad.tensor.ir.common import randn, require_float, same_dtype
from asgrad.tensor.ir.dtypes import accumulating
from asgrad.tensor.ir.registry import Attrs, OpCase, OpDef, TensorType, get_op, register_op
from asgrad.tensor.ops._depth import depth_taps, fold, pad_axis, pad_np, triple, unfold
from asgrad.tensor.ops.spatial import CONV_ATTRS, OUTPUT_PADDING

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor


def _attrs(attrs: Attrs) -> tuple[tuple[int, int, int], ...]:
    return tuple(triple(attrs[k]) for k in ("stride", "padding", "dilation"))


def _infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = types[0], types[1]
    require_float(x)
    dtype = same_dtype(types, "input, weight and bias")
    if len(x.shape) != 5 or len(w.shape) != 5:
        raise ShapeError(
            "conv3d needs input (N, C, D, H, W) and weight (O, C/groups, kD, kH, kW),"
            f" got {x} and {w}"
        )
    stride, padding, dilation = _attrs(attrs)
    groups = int(attrs["groups"])
    if x.shape[1] % groups or w.shape[0] % groups or w.shape[1] != x.shape[1] // groups:
        raise ShapeError(f"input {x} and weight {w} disagree on channels for groups={groups}")
    if len(types) == 3 and types[2].shape != (w.shape[0],):
        raise ShapeError(f"bias {types[2]} must have shape ({w.shape[0]},)")
    out = [
        (x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(3)
    ]
    if min(out) <= 0 or min(stride) <= 0 or min(dilation) <= 0 or min(padding) < 0:
        raise ShapeError(f"conv3d of {x} with {w} gives no output (size {out}); check the window")
    return TensorType((x.shape[0], w.shape[0], *out), dtype)


def _plane_attrs(attrs: Attrs) -> dict[str, Any]:
    stride, padding, dilation = _attrs(attrs)
    return {
        "stride": stride[1:],
        "padding": padding[1:],
        "dilation": dilation[1:],
        "groups": int(attrs["groups"]),
    }


def _conv3d(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, **attrs: Any) -> np.ndarray:
    stride, padding, dilation = _attrs(attrs)
    out_d = _infer(
        [TensorType(x.shape, x.dtype.name), TensorType(w.shape, w.dtype.name)], attrs
    ).shape[2]
    xp = pad_np(x, (padding[0], 0, 0), 0.0)
    conv2d = get_op("conv2d").kernel
    total = np.zeros(())
    for k in range(w.shape[2]):
        part = xp[:, :, k * dilation[0] : k * dilation[0] + (out_d - 1) * stride[0] + 1 : stride[0]]
        n, c, _, h, wd = part.shape
        planes = part.transpose(0, 2, 1, 3, 4).reshape(n * out_d, c, h, wd)
        y = conv2d(planes, w[:, :, k], **_plane_attrs(attrs))
        total = total + y.reshape(n, out_d, *y.shape[1:]).transpose(0, 2, 1, 3, 4)
    out = np.asarray(total, dtype=x.dtype)
    return out + bias[0].reshape(-1, 1, 1, 1) if bias else out


def _expand(x: Tensor, w: Tensor, *bias: Tensor, **attrs: Any) -> Tensor:
    stride, padding, dilation = _attrs(attrs)
    out_d = _infer([x.node.type, w.node.type], attrs).shape[2]
    xp = pad_axis(x, 2, padding[0], padding[0], 0.0)
    g = x.graph
    total: Tensor | None = None
    for k, part in enumerate(depth_taps(xp, w.shape[2], stride[0], dilation[0], out_d)):
        y = g.apply("conv2d", (fold(part), w[:, :, k]), _plane_attrs(attrs))
        total = y if total is None else total + y
    assert total is not None
    out = unfold(total, out_d)
    return out + bias[0].reshape(-1, 1, 1, 1) if bias else out


def _cases(rng: np.random.Generator) -> list[OpCase]:
    def attrs(**kw: Any) -> dict[str, Any]:
        return kw

    return [
        OpCase((randn(rng, 2, 2, 4, 5, 4), randn(rng, 3, 2, 2, 3, 2)), attrs(), label="plain"),
        OpCase(
            (randn(rng, 1, 4, 5, 4, 4), randn(rng, 4, 2, 3, 2, 3), randn(rng, 4)),
            attrs(stride=(2, 1, 2), padding=(1, 1, 1), dilation=(1, 2, 1), groups=2),
            label="bias, stride, padding, dilation, groups",
        ),
    ]


register_op(
    OpDef(
        name="conv3d",
        family="conv",
        infer=_infer,
        kernel=accumulating(_conv3d),
        expand=_expand,
        arity=None,
        cases=_cases,
        tolerance=get_op("conv2d").tolerance,
        doc="3-D convolution: conv2d per depth tap of the kernel, summed",
        attrs=CONV_ATTRS,
    )
)


# -- transposed --------------------------------------------------------------------------------
# conv_transpose3d: each depth tap k is a conv_transpose2d of every input depth plane,
# landing at output depths i * stride + k * dilation (before the padding is cropped).


def _infer_transpose(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, w = types[0], types[1]
    require_float(x)
    dtype = same_dtype(types, "input, weight and bias")
    if len(x.shape) != 5 or len(w.shape) != 5:
        raise ShapeError(
            "conv_transpose3d needs input (N, C_in, D, H, W) and weight"
            f" (C_in, C_out/groups, kD, kH, kW), got {x} and {w}"
        )
    stride, padding, dilation = _attrs(attrs)
    extra = triple(attrs["output_padding"])
    groups = int(attrs["groups"])
    if x.shape[1] != w.shape[0] or x.shape[1] % groups:
        raise ShapeError(f"input {x} and weight {w} disagree on channels for groups={groups}")
    if len(types) == 3 and types[2].shape != (w.shape[1] * groups,):
        raise ShapeError(f"bias {types[2]} must have shape ({w.shape[1] * groups},)")
    if any(e >= max(s, d) for e, s, d in zip(extra, stride, dilation, strict=True)):
        raise ShapeError(f"output_padding {list(extra)} must be smaller than stride or dilation")
    out = [
        (x.shape[2 + i] - 1) * stride[i]
        - 2 * padding[i]
        + dilation[i] * (w.shape[2 + i] - 1)
        + extra[i]
        + 1
        for i in range(3)
    ]
    if min(out) <= 0:
        raise ShapeError(f"conv_transpose3d of {x} with {w} gives no output (size {out})")
    return TensorType((x.shape[0], w.shape[1] * groups, *out), dtype)


def _transpose_plane_attrs(attrs: Attrs) -> dict[str, Any]:
    plane = _plane_attrs(attrs)
    plane["output_padding"] = triple(attrs["output_padding"])[1:]
    return plane


def _conv_transpose3d(x: np.ndarray, w: np.ndarray, *bias: np.ndarray, **attrs: Any) -> np.ndarray:
    stride, padding, dilation = _attrs(attrs)
    extra = triple(attrs["output_padding"])[0]
    n, _, depth, h, wd = x.shape
    full = (depth - 1) * stride[0] + dilation[0] * (w.shape[2] - 1) + 1 + extra
    planes = x.transpose(0, 2, 1, 3, 4).reshape(n * depth, x.shape[1], h, wd)
    kernel = get_op("conv_transpose2d").kernel
    total: np.ndarray | None = None
    for k in range(w.shape[2]):
        y = kernel(planes, w[:, :, k], **_transpose_plane_attrs(attrs))
        y = y.reshape(n, depth, *y.shape[1:]).transpose(0, 2, 1, 3, 4)
        if total is None:
            total = np.zeros((*y.shape[:2], full, *y.shape[3:]))
        start = k * dilation[0]
        total[:, :, start : start + (depth - 1) * stride[0] + 1 : stride[0]] += y
    assert total is not None
    out = np.asarray(total[:, :, padding[0] : full - padding[0]], dtype=x.dtype)
    return out + bias[0].reshape(-1, 1, 1, 1) if bias else out


def _spread(y: Tensor, stride: int) -> Tensor:
    """(N, C, D, H, W) with ``stride - 1`` zero planes after each depth plane but the last."""
    if stride == 1:
        return y
    g = y.graph
    _, c, depth, h, w = y.shape
    planes = y.expand_dims(3)
    off = g.constant(np.zeros((1, 1, 1, stride - 1, 1, 1), dtype=bool), "bool")
    zeros = g.apply("where", (off, planes, g.constant(0.0, y.dtype)), {})
    both = g.apply("concat", [planes, zeros], {"axis": 3}).reshape(-1, c, depth * stride, h, w)
    return both[:, :, : (depth - 1) * stride + 1]


def _expand_transpose(x: Tensor, w: Tensor, *bias: Tensor, **attrs: Any) -> Tensor:
    stride, padding, dilation = _attrs(attrs)
    extra = triple(attrs["output_padding"])[0]
    depth = x.shape[2]
    full = (depth - 1) * stride[0] + dilation[0] * (w.shape[2] - 1) + 1 + extra
    g = x.graph
    planes = fold(x)
    total: Tensor | None = None
    for k in range(w.shape[2]):
        y = g.apply("conv_transpose2d", (planes, w[:, :, k]), _transpose_plane_attrs(attrs))
        placed = _spread(unfold(y, depth), stride[0])
        start = k * dilation[0]
        placed = pad_axis(placed, 2, start, full - start - placed.shape[2], 0.0)
        total = placed if total is None else total + placed
    assert total is not None
    out = total[:, :, padding[0] : full - padding[0]]
    return out + bias[0].reshape(-1, 1, 1, 1) if bias else out


def _transpose_cases(rng: np.random.Generator) -> list[OpCase]:
    def attrs(**kw: Any) -> dict[str, Any]:
        return kw

    return [
        OpCase((randn(rng, 2, 3, 3, 4, 3), randn(rng, 3, 2, 2, 3, 2)), attrs(), label="plain"),
        OpCase(
            (randn(rng, 1, 4, 3, 3, 4), randn(rng, 4, 1, 3, 2, 3), randn(rng, 2)),
            attrs(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 1), groups=2),
            label="bias, stride, padding, output padding, groups",
        ),
        OpCase(
            (randn(rng, 1, 2, 3, 3, 3), randn(rng, 2, 2, 2, 2, 2)),
            attrs(stride=(3, 1, 1), dilation=(2, 1, 1)),
            label="dilation",
        ),
    ]


register_op(
    OpDef(
        name="conv_transpose3d",
        family="conv",
        infer=_infer_transpose,
        kernel=accumulating(_conv_transpose3d),
        expand=_expand_transpose,
        arity=None,
        cases=_transpose_cases,
        tolerance=get_op("conv_transpose2d").tolerance,
        doc="3-D transposed convolution: conv_transpose2d per depth tap, placed in depth",
        attrs=(*CONV_ATTRS, OUTPUT_PADDING),
    )
)
