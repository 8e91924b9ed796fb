"""ONNX's control flow: ``Scan`` and ``Loop`` onto asgrad's ``scan``, ``If`` on a
condition known at load time.

The body graph is built by the same importers, inside the body that
[`asgrad.tensor.scan`][asgrad.tensor.scan] traces; it reads the enclosing graph's values by name.
``Scan`` takes any scan axes and directions (the inputs are moved and flipped
around one forward scan). ``Loop`` needs its trip count at load time and a body
whose continue condition stays true (a ``for`` loop): the iteration number is fed
as a scanned input. A ``Loop`` that may stop early is refused.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import MutableMapping

import numpy as np
import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Static, Value, attributes
from asgrad.tensor import Tensor, scan, stack

__all__ = ["CONTROL_IMPORTERS"]


def _body(node: onnx.NodeProto, name: str = "body") -> onnx.GraphProto:
    for a in node.attribute:
        if a.name == name:
            graph: onnx.GraphProto = a.g
            return graph
    raise OnnxImportError(f"{node.op_type} has no {name} graph")


def _run_body(
    ctx: ImportContext,
    body: onnx.GraphProto,
    outer: MutableMapping[str, Value],
    values: list[Value],
) -> list[Value]:
    """The body's outputs, its inputs bound to ``values``, in the graph they live in."""
    graph = next((v.graph for v in values if isinstance(v, Tensor)), ctx.graph)
    env: ChainMap[str, Value] = ChainMap(
        {i.name: v for i, v in zip(body.input, values, strict=True)}, outer
    )
    ctx.run(ctx.within(graph), body.node, env)
    return [env[o.name] for o in body.output]


def _scan(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    if ctx.opset < 9:
        return _batched_scan(ctx, node, xs)
    a = attributes(node)
    body = _body(node)
    m = int(a["num_scan_inputs"])
    n = len(xs) - m
    states = [ctx.tensor(v) for v in xs[:n]]
    in_axes = [int(v) for v in a.get("scan_input_axes", [0] * m)]
    in_dirs = [int(v) for v in a.get("scan_input_directions", [0] * m)]
    scanned: list[Tensor] = []
    for x, axis, reverse in zip(xs[n:], in_axes, in_dirs, strict=True):
        t = ctx.tensor(x)
        axis %= len(t.shape)
        t = t.movedim(axis, 0) if axis else t
        scanned.append(t.flip(0) if reverse else t)
    outer = ctx.env

    def step(carry: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        outs = _run_body(ctx, body, outer, [*carry, *x])
        tensors = [ctx.within(carry[0].graph if carry else x[0].graph).tensor(v) for v in outs]
        return tensors[:n], tensors[n:]

    final, ys = scan(step, states, scanned)
    k = len(body.output) - n
    out_axes = [int(v) for v in a.get("scan_output_axes", [0] * k)]
    out_dirs = [int(v) for v in a.get("scan_output_directions", [0] * k)]
    results: list[Value] = list(final)
    for y, axis, reverse in zip(ys, out_axes, out_dirs, strict=True):
        y = y.flip(0) if reverse else y
        axis %= len(y.shape)
        results.append(y.movedim(0, axis) if axis else y)
    return results


def _batched_scan(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    """Scan before opset 9: every state and scanned input has a leading batch axis
    (then the sequence axis); each batch entry is scanned on its own and the results
    stacked. ``sequence_lens`` must be absent or the full length for every entry."""
    a = attributes(node)
    body = _body(node)
    m = int(a["num_scan_inputs"])
    rest = [ctx.tensor(v) for v in xs[1:]]
    n = len(rest) - m
    if not rest or n < 0 or m == 0:
        raise OnnxImportError("Scan has fewer inputs than num_scan_inputs, or none scanned")
    if rest[n].shape[0] == 0:
        raise OnnxImportError("Scan over an empty batch is not supported")
    batch, length = rest[n].shape[0], rest[n].shape[1]
    if node.input[0]:
        lens = ctx.static(xs[0], "Scan's sequence_lens")
        if np.any(lens != length):
            raise OnnxImportError("Scan with sequence_lens shorter than the sequence")
    dirs = [int(v) for v in a.get("directions", [0] * m)]
    outer = ctx.env
    per_entry: list[list[Tensor]] = []
    for b in range(batch):
        states = [t[b] for t in rest[:n]]
        scanned = [t[b].flip(0) if d else t[b] for t, d in zip(rest[n:], dirs, strict=True)]

        def step(carry: list[Tensor], x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
            outs = _run_body(ctx, body, outer, [*carry, *x])
            graph = carry[0].graph if carry else x[0].graph
            tensors = [ctx.within(graph).tensor(v) for v in outs]
            return tensors[:n], tensors[n:]

        final, ys = scan(step, states, scanned)
        per_entry.append([*final, *ys])
    return [stack([entry[i] for entry in per_entry], 0) for i in range(len(per_entry[0]))]


def _loop(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    body = _body(node)
    if not (xs and node.input[0]):
        raise OnnxImportError("Loop without a trip count (a while loop) is not supported")
    trips = int(ctx.static(xs[0], "Loop's trip count").reshape(-1)[0])
    if len(xs) > 1 and node.input[1] and not bool(ctx.static(xs[1], "Loop's condition")):
        raise OnnxImportError("Loop whose condition is false at the start is not supported")
    carried = [ctx.tensor(v) for v in xs[2:]]
    outer = ctx.env
    counter = ctx.graph.constant(np.arange(trips, dtype=np.int64), dtype="int64")

    def step(carry: list[Tensor], i: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        outs = _run_body(ctx, body, outer, [i, Static(np.array(True)), *carry])
        cond = outs[0]
        if not (isinstance(cond, Static) and bool(cond.value)):
            raise OnnxImportError(
                "Loop whose body computes its continue condition (it may stop early) is not"
                " supported; asgrad loops run a trip count known at load time"
            )
        inner = ctx.within(i.graph)
        tensors = [inner.tensor(v) for v in outs[1:]]
        return tensors[: len(carry)], tensors[len(carry) :]

    final, ys = scan(step, carried, counter)
    return [*final, *ys]


def _if(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    cond = bool(ctx.static(xs[0], "If's condition").reshape(-1)[0])
    branch = _body(node, "then_branch" if cond else "else_branch")
    return _run_body(ctx, branch, ctx.env, [])


CONTROL_IMPORTERS: dict[str, Importer] = {"Scan": _scan, "Loop": _loop, "If": _if}
"""The importers of this module, by ONNX op type."""
