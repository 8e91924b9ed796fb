"""ONNX ops whose output shape depends on input values, and generated signals.

asgrad shapes are static, so ``NonZero``, ``Compress`` (its condition), ``Unique``,
``ReverseSequence`` (its lengths) and the window functions read those inputs at load
time (a constant, an initializer, or ``load(..., constants=...)``); the data itself
may be a graph value, gathered at the positions computed now. ``GatherND`` and
``ScatterND`` become a gather or scatter on the flattened data.
"""

from __future__ import annotations

import numpy as np
import onnx

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor

__all__ = ["STATIC_IMPORTERS"]


def _window(kind: str) -> Importer:
    def imp(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
        a = attributes(node)
        size = int(ctx.static(xs[0], f"{node.op_type}'s size").reshape(-1)[0])
        dtype_id = int(a.get("output_datatype", onnx.TensorProto.FLOAT))
        if dtype_id not in ONNX_TO_DTYPE:
            raise OnnxImportError(f"{node.op_type} of ONNX type {dtype_id} has no asgrad dtype")
        n = np.arange(size, dtype=np.float64)
        period = size if a.get("periodic", 1) else max(size - 1, 1)
        phase = 2.0 * np.pi * n / period
        if kind == "hann":
            w = 0.5 - 0.5 * np.cos(phase)
        elif kind == "hamming":
            w = 25.0 / 46.0 - 21.0 / 46.0 * np.cos(phase)
        else:  # blackman
            w = 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2.0 * phase)
        return [Static(w.astype(ONNX_TO_DTYPE[dtype_id]))]

    return imp


def _non_zero(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.static(xs[0], "NonZero's input (its output size depends on it)")
    return [Static(np.asarray(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1))]


def _compress(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    keep = ctx.static(xs[1], "Compress's condition").astype(bool).reshape(-1)
    axis = attributes(node).get("axis")
    if axis is None:
        x = x.reshape((-1,))
        axis = 0
    axis = int(axis) % len(x.shape)
    positions = np.nonzero(keep[: x.shape[axis]])[0].astype(np.int64)
    index = ctx.tensor(Static(positions))
    return [ctx.graph.apply("gather", [x, index], {"axis": axis})]


def _reverse_sequence(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    lengths = ctx.static(xs[1], "ReverseSequence's sequence_lens").reshape(-1)
    batch_axis, time_axis = int(a.get("batch_axis", 1)), int(a.get("time_axis", 0))
    steps = x.shape[time_axis]
    order = np.tile(np.arange(steps), (len(lengths), 1))  # (batch, time)
    for b, n in enumerate(lengths):
        order[b, : int(n)] = order[b, : int(n)][::-1]
    if time_axis < batch_axis:
        order = order.T
    shape = [1] * len(x.shape)
    shape[batch_axis], shape[time_axis] = x.shape[batch_axis], steps
    index = np.broadcast_to(order.reshape(shape), x.shape).astype(np.int64)
    return [x.take_along_axis(ctx.tensor(Static(np.ascontiguousarray(index))), time_axis)]


def _linear(
    node: onnx.NodeProto, shape: tuple[int, ...], indices: np.ndarray, batch: int = 0
) -> np.ndarray:
    """Flat positions in ``shape`` of the index tuples along ``indices``' last axis,
    each followed by the positions of the slice it picks; the first ``batch`` axes of
    ``indices`` and ``shape`` are shared (``batch_dims``)."""
    depth = indices.shape[-1]
    lead = shape[batch : batch + depth]
    wrapped = np.where(indices < 0, indices + np.asarray(lead, dtype=np.int64), indices)
    inner = int(np.prod(shape[batch + depth :], dtype=np.int64))
    per_batch = int(np.prod(shape[batch:], dtype=np.int64))
    flat = np.ravel_multi_index(tuple(np.moveaxis(wrapped, -1, 0)), lead) if depth else 0
    flat = np.asarray(flat, dtype=np.int64) * inner
    if batch:
        count = int(np.prod(shape[:batch], dtype=np.int64))
        offsets = (np.arange(count, dtype=np.int64) * per_batch).reshape(shape[:batch])
        flat = flat + offsets.reshape(offsets.shape + (1,) * (flat.ndim - batch))
    return flat[..., None] + np.arange(inner)


def _gather_nd(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    indices = ctx.static(xs[1], "GatherND's indices")
    batch = int(attributes(node).get("batch_dims", 0))
    flat = _linear(node, x.shape, indices, batch)
    depth = indices.shape[-1]
    out_shape = (*indices.shape[:-1], *x.shape[batch + depth :])
    picked = ctx.graph.apply(
        "gather", [x.reshape((-1,)), ctx.tensor(Static(flat.reshape(-1)))], {"axis": 0}
    )
    return [picked.reshape(out_shape)]


_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_nd(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    x = ctx.tensor(xs[0])
    indices = ctx.static(xs[1], "ScatterND's indices")
    updates = ctx.tensor(xs[2])
    flat = ctx.tensor(Static(_linear(node, x.shape, indices).reshape(-1)))
    reduction = str(attributes(node).get("reduction", "none"))
    data: Tensor = x.reshape((-1,))
    values = updates.reshape((-1,))
    if reduction == "none":
        out = data.scatter(0, flat, values)
    elif reduction in _REDUCE:
        out = data.scatter_reduce(0, flat, values, _REDUCE[reduction], include_self=True)
    else:
        raise OnnxImportError(f"ScatterND with reduction={reduction!r} is not supported")
    return [out.reshape(x.shape)]


def _unique(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """numpy's ``unique`` of a value known at load time; ``sorted=0`` keeps the order
    of first occurrence."""
    a = attributes(node)
    x = ctx.static(xs[0], "Unique's input (its output size depends on it)")
    axis = a.get("axis")
    y, first, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not a.get("sorted", 1):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else int(axis))
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return [Static(y), *(Static(v.astype(np.int64)) for v in (first, inverse, counts))]


STATIC_IMPORTERS: dict[str, Importer] = {
    "Unique": _unique,
    "HannWindow": _window("hann"),
    "HammingWindow": _window("hamming"),
    "BlackmanWindow": _window("blackman"),
    "NonZero": _non_zero,
    "Compress": _compress,
    "ReverseSequence": _reverse_sequence,
    "GatherND": _gather_nd,
    "ScatterND": _scatter_nd,
}
"""The importers of this module, by ONNX op type."""
