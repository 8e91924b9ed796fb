"""How sorting, scans along an axis, the other reductions and the gather/scatter
family are written in ONNX.

``sort`` and ``argsort`` are a ``TopK`` over the whole axis (ONNX orders ties by
index, as asgrad's stable sort does); ``cumsum`` is ``CumSum``; ``prod``,
``logsumexp``, ``all`` and ``any`` are reductions (the last two through int32);
``take_along_axis`` is ``GatherElements`` and the scatters ``ScatterElements``
with a reduction (``max``/``min`` from opset 18).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from asgrad.onnx.builder import DTYPE_TO_ONNX, OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.onnx.export_ops import Exporter, axes_of
from asgrad.tensor import Node

__all__ = ["INDEX_EXPORTERS"]


def _axis(node: Node, attr: str = "axis") -> int:
    return int(node.attrs.get(attr, -1)) % len(node.inputs[0].shape)


def _argmin(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    keep = int(bool(node.attrs.get("keepdims", False)))
    return b.op("ArgMin", xs, axis=_axis(node), keepdims=keep)


def _sorted(b: OnnxBuilder, node: Node, xs: list[str]) -> list[str]:
    axis = _axis(node)
    k = b.ints([node.inputs[0].shape[axis]], "k")
    largest = int(bool(node.attrs.get("descending", False)))
    return b.ops("TopK", [xs[0], k], 2, axis=axis, largest=largest, sorted=1)


def _sort(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return _sorted(b, node, xs)[0]


def _argsort(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    indices = _sorted(b, node, xs)[1]
    if node.dtype != "int64":
        return b.op("Cast", [indices], to=DTYPE_TO_ONNX[node.dtype])
    return indices


def _cumsum(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    x = xs[0]
    if node.inputs[0].dtype != node.dtype:  # an integer sum accumulates in int64
        x = b.op("Cast", [x], to=DTYPE_TO_ONNX[node.dtype])
    axis = b.const(_axis(node), "int64", "axis")
    return b.op("CumSum", [x, axis], reverse=int(bool(node.attrs.get("reverse", False))))


def _reduce(op_type: str, through_int: bool = False) -> Exporter:
    def export(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
        x = xs[0]
        source = node.inputs[0]
        if through_int:  # ONNX's ReduceMin/ReduceMax take no bools
            x = b.op("Cast", [x], to=DTYPE_TO_ONNX["int32"])
        elif source.dtype != node.dtype:
            x = b.op("Cast", [x], to=DTYPE_TO_ONNX[node.dtype])
        axes = axes_of(node.attrs.get("axis"), len(source.shape))
        y = b.reduce(op_type, x, axes, bool(node.attrs.get("keepdims", False)))
        if through_int:
            return b.op("Cast", [y], to=DTYPE_TO_ONNX["bool"])
        return y

    return export


def _take_along_axis(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return b.op("GatherElements", xs, axis=_axis(node))


_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _scatter(b: OnnxBuilder, node: Node, xs: list[str], reduce: str) -> str:
    if reduce not in _REDUCTIONS:
        raise OnnxExportError(
            f"scatter_reduce with reduce={reduce!r} has no ONNX ScatterElements form;"
            f" use one of {sorted(_REDUCTIONS)}"
        )
    reduction = _REDUCTIONS[reduce]
    if reduction in ("max", "min") and b.opset < 18:
        raise OnnxExportError(
            f"scatter_reduce {reduce} is ONNX's ScatterElements reduction={reduction}, from"
            " opset 18; export with opset=18 or newer"
        )
    x, index, src = xs
    want = node.inputs[1].shape
    if node.inputs[2].shape != want:  # src may be larger than index: its leading block
        dims = list(range(len(want)))
        src = b.op("Slice", [src, b.ints([0] * len(dims), "starts"), b.ints(want, "ends")])
    return b.op("ScatterElements", [x, index, src], axis=_axis(node), reduction=reduction)


def _scatter_reduce(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    if not node.attrs.get("include_self", True):
        raise OnnxExportError(
            "scatter_reduce with include_self=False has no ONNX form; ONNX's reductions"
            " include the value scattered into"
        )
    return _scatter(b, node, xs, str(node.attrs["reduce"]))


def _scatter_add_along(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """``g`` added at ``idx`` into zeros shaped like ``x`` (read for its shape only)."""
    g, index, like = xs
    zero = numpy_helper.from_array(np.zeros(1, dtype=node.dtype), "zero")
    zeros = b.op("ConstantOfShape", [b.op("Shape", [like])], value=zero)
    return b.op("ScatterElements", [zeros, index, g], axis=_axis(node), reduction="add")


INDEX_EXPORTERS: dict[str, Exporter] = {
    "argmin": _argmin,
    "sort": _sort,
    "argsort": _argsort,
    "cumsum": _cumsum,
    "prod": _reduce("ReduceProd"),
    "logsumexp": _reduce("ReduceLogSumExp"),
    "all": _reduce("ReduceMin", through_int=True),
    "any": _reduce("ReduceMax", through_int=True),
    "take_along_axis": _take_along_axis,
    "scatter_add_along": _scatter_add_along,
    "scatter_reduce": _scatter_reduce,
}
"""The exporters of this module, by asgrad op."""
