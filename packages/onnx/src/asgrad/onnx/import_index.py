"""ONNX's index, sort, scan-like and padding ops as asgrad ops.

``GatherElements`` and ``ScatterElements`` become ``take_along_axis`` and
``scatter``/``scatter_reduce`` (ONNX's negative indices made positive first),
``TopK`` asgrad's ``topk``, ``CumSum`` its ``cumsum`` (``exclusive`` by a shift),
``Trilu`` ``tril``/``triu``, ``Einsum`` ``einsum``, ``Pad`` ``pad``; ``ArgMin`` and
``ArgMax`` with ``select_last_index`` reverse the axis first.
"""

from __future__ import annotations

import numpy as np
import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, concat, einsum, pad, where

__all__ = ["INDEX_IMPORTERS"]


def _wrap(ctx: ImportContext, indices: Value, size: int) -> Tensor:
    """``indices`` with ONNX's negative entries (counted from the end) made positive."""
    if isinstance(indices, Static):
        v = indices.value
        return ctx.tensor(Static(np.where(v < 0, v + size, v)))
    zero = ctx.graph.constant(0, dtype=indices.dtype)
    shifted = indices + ctx.graph.constant(size, dtype=indices.dtype)
    return where(indices < zero, shifted, indices)


def _axis(node: onnx.NodeProto, rank: int, default: int = 0) -> int:
    axis = int(attributes(node).get("axis", default))
    if not -rank <= axis < rank:
        raise OnnxImportError(f"axis {axis} is outside a rank-{rank} input")
    return axis % rank


def _gather_elements(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    axis = _axis(node, len(x.shape))
    indices = _wrap(ctx, xs[1], x.shape[axis])
    return [x.take_along_axis(indices, axis)]


_SCATTER = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_elements(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    axis = _axis(node, len(x.shape))
    indices = _wrap(ctx, xs[1], x.shape[axis])
    src = ctx.tensor(xs[2])
    reduction = attributes(node).get("reduction", "none")
    if reduction == "none":
        return [x.scatter(axis, indices, src)]
    if reduction not in _SCATTER:
        raise OnnxImportError(f"ScatterElements with reduction={reduction!r} is not supported")
    return [x.scatter_reduce(axis, indices, src, _SCATTER[reduction], include_self=True)]


def _top_k(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    axis = _axis(node, len(x.shape), -1)
    k = int(ctx.static(xs[1], "TopK's k").reshape(-1)[0]) if len(xs) > 1 else int(a["k"])
    if not a.get("sorted", 1):
        raise OnnxImportError("TopK with sorted=0 leaves the order to the runtime; give sorted=1")
    values, indices = x.topk(k, axis, largest=bool(a.get("largest", 1)))
    return [values, indices if indices.dtype == "int64" else indices.cast("int64")]


def _cumsum(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    axis = int(ctx.static(xs[1], "CumSum's axis").reshape(-1)[0])
    if not -rank <= axis < rank:
        raise OnnxImportError(f"CumSum's axis {axis} is outside a rank-{rank} input")
    axis %= rank
    reverse = bool(a.get("reverse", 0))
    total = x.cumsum(axis, reverse=reverse)
    if total.dtype != x.dtype:  # an int32 sum accumulates in int64; ONNX keeps int32
        total = total.cast(x.dtype)
    if not a.get("exclusive", 0):
        return [total]
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = 1
    zeros = ctx.graph.constant(np.zeros(shape, dtype=x.dtype), dtype=x.dtype)
    before = (slice(None),) * axis
    if reverse:  # out[i] = sum of x[i+1:]
        return [concat([total[(*before, slice(1, n))], zeros], axis)]
    return [concat([zeros, total[(*before, slice(0, n - 1))]], axis)]


def _trilu(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    k = int(ctx.static(xs[1], "Trilu's k").reshape(-1)[0]) if len(xs) > 1 and node.input[1] else 0
    if any(d == 0 for d in x.shape):
        return [x]
    return [x.triu(k) if attributes(node).get("upper", 1) else x.tril(k)]


def _einsum(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    equation = str(attributes(node)["equation"]).replace(" ", "")
    return [einsum(equation, *(ctx.tensor(x) for x in xs))]


def _arg(largest: bool) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a = attributes(node)
        x = ctx.tensor(xs[0])
        axis = _axis(node, len(x.shape))
        keep = bool(a.get("keepdims", 1))
        last = bool(a.get("select_last_index", 0))
        source = x.flip(axis) if last else x
        found = source.argmax(axis, keepdims=keep) if largest else source.argmin(axis, keep)
        if last:  # the first of the reversed axis is the last of the axis
            found = ctx.graph.constant(x.shape[axis] - 1, dtype=found.dtype) - found
        return [found if found.dtype == "int64" else found.cast("int64")]

    return imp


def _hardmax(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    if ctx.opset < 13:
        raise OnnxImportError("Hardmax before opset 13 flattens its input; use opset 13 or newer")
    axis = _axis(node, rank, -1)
    hot = x.argmax(axis).one_hot(x.shape[axis], x.dtype)
    if axis != rank - 1:
        hot = hot.movedim(rank - 1, axis)
    return [hot]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _pad(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    if len(xs) > 1 and node.input[1]:
        widths = [int(p) for p in ctx.static(xs[1], "Pad's pads").reshape(-1)]
    else:
        widths = [int(p) for p in a.get("pads", [])]
    value = 0.0
    if len(xs) > 2 and node.input[2]:
        value = float(ctx.static(xs[2], "Pad's constant_value").reshape(-1)[0])
    elif "value" in a:
        value = float(a["value"])
    if len(xs) > 3 and node.input[3]:
        axes = [int(v) % rank for v in ctx.static(xs[3], "Pad's axes").reshape(-1)]
    else:
        axes = list(range(rank))
    mode = str(a.get("mode", "constant"))
    if mode not in _PAD_MODES:
        raise OnnxImportError(f"Pad with mode={mode!r} is not supported")
    half = len(widths) // 2
    pairs = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        pairs[axis] = (widths[i], widths[i + half])
    if all(p == (0, 0) for p in pairs):
        return [x]
    return [pad(x, tuple(pairs), mode=_PAD_MODES[mode], value=value)]


def _center_crop_pad(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """A centred window of each named axis: cropped (the start rounded down) or padded
    with zeros (the odd unit at the end)."""
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    target = [int(v) for v in ctx.static(xs[1], "CenterCropPad's shape").reshape(-1)]
    axes = [int(v) % rank for v in attributes(node).get("axes", range(rank))]
    index: list[slice] = [slice(None)] * rank
    pairs = [(0, 0)] * rank
    for axis, want in zip(axes, target, strict=True):
        have = x.shape[axis]
        if want < have:
            start = (have - want) // 2
            index[axis] = slice(start, start + want)
        elif want > have:
            pairs[axis] = ((want - have) // 2, want - have - (want - have) // 2)
    y = x[tuple(index)]
    if any(p != (0, 0) for p in pairs):
        y = pad(y, tuple(pairs))
    return [y]


def _affine_grid(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """The sampling grid of affine matrices ``theta`` (N, 2, 3) or (N, 3, 4) over an
    output of the given size: the normalised coordinates ``(x, y[, z], 1)`` of every
    position times ``theta`` transposed."""
    theta = ctx.tensor(xs[0])
    size = [int(v) for v in ctx.static(xs[1], "AffineGrid's size").reshape(-1)]
    spatial = size[2:]
    if len(spatial) not in (2, 3):
        raise OnnxImportError(f"AffineGrid of a {len(spatial)}-D size; ONNX has 2-D and 3-D")
    align = bool(attributes(node).get("align_corners", 0))

    def axis(n: int) -> np.ndarray:
        if align:
            return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return (2.0 * np.arange(n) + 1.0) / n - 1.0

    mesh = np.meshgrid(*(axis(n) for n in spatial), indexing="ij")  # z, y, x order
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x, y[, z]
    base = np.stack([*coords, np.ones_like(coords[0])], axis=-1).astype(theta.dtype)
    grid = ctx.tensor(Static(base[None])) @ theta.transpose((0, 2, 1))
    return [grid.reshape((size[0], *spatial, len(spatial)))]


INDEX_IMPORTERS: dict[str, Importer] = {
    "AffineGrid": _affine_grid,
    "CenterCropPad": _center_crop_pad,
    "GatherElements": _gather_elements,
    "ScatterElements": _scatter_elements,
    "Scatter": _scatter_elements,  # deprecated since opset 11: ScatterElements
    "TopK": _top_k,
    "CumSum": _cumsum,
    "Trilu": _trilu,
    "Einsum": _einsum,
    "ArgMax": _arg(largest=True),
    "ArgMin": _arg(largest=False),
    "Hardmax": _hardmax,
    "Pad": _pad,
}
"""The importers of this module, by ONNX op type."""
